# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The upstream image digests ``lanekit.serving.pin`` writes into an image spec.

One job: from the registry's raw answer for ``<repository>:<tag>`` (``docker buildx imagetools
inspect --raw`` or ``skopeo inspect --raw``), the digest per architecture the spec pins, or one
sentence saying why not. The command runs in the action plugin; everything decided is here.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image._spec import ARCHES, DIGEST_RE

# The tools that print a registry's raw manifest, in the order they are tried.
TOOLS = ("docker", "skopeo")
LIST_TYPES = ("application/vnd.docker.distribution.manifest.list.v2+json", "application/vnd.oci.image.index.v1+json")
SINGLE_TYPES = ("application/vnd.docker.distribution.manifest.v2+json", "application/vnd.oci.image.manifest.v1+json")


def resolver_argv(tool: str, ref: str) -> list[str]:
    """The command (an argv list, never a shell string) printing the raw manifest of ``ref``."""
    if tool == "docker":
        return ["docker", "buildx", "imagetools", "inspect", "--raw", ref]
    return ["skopeo", "inspect", "--raw", f"docker://{ref}"]


def choose_tool(which: Callable[[str], str | None]) -> str:
    """The first tool of TOOLS on the controller's PATH; none is one sentence with the fix."""
    for tool in TOOLS:
        if which(tool):
            return tool
    raise LanekitError("neither docker (with its buildx plugin) nor skopeo is on the controller's PATH, and pin "
                       "reads the upstream digests with one of them; install one (apt-get install skopeo) or set "
                       "upstream.digests by hand.")


def failure_sentence(tool: str, ref: str, returncode: int, stderr: str) -> str:
    """A resolver that failed (network, unknown tag, login), as one sentence."""
    lines = [line.strip() for line in (stderr or "").splitlines() if line.strip()]
    cause = lines[-1] if lines else f"exit status {returncode}"
    argv = " ".join(resolver_argv(tool, ref))
    return (f"could not read the manifest of {ref} from its registry: `{argv}` failed: {cause}. Check the "
            f"controller's network and the tag (and `{tool} login` for a private repository), then re-run.")


def _arch_of(platform: Any) -> str | None:
    if not isinstance(platform, dict) or platform.get("os") != "linux":
        return None
    arch, variant = platform.get("architecture"), platform.get("variant")
    if arch == "amd64":
        return "amd64"
    if arch == "arm64" and variant in (None, "", "v8"):
        return "arm64"
    return None


def manifest_digests(raw: bytes, ref: str) -> dict[str, str] | str:
    """Per-architecture digests of a manifest list (a mapping), or the digest of a single manifest (text).

    A manifest list names each platform's manifest by digest; attestation entries (platform
    unknown/unknown) and platforms lanekit does not run on are left out. A single manifest
    names no platform: its digest is the sha256 of its bytes as the registry served them.
    """
    try:
        doc = json.loads(raw)
    except ValueError:
        raise LanekitError(f"the registry's answer for {ref} is not a JSON manifest; check the reference "
                           f"(repository and tag) in the image spec.") from None
    if not isinstance(doc, dict):
        raise LanekitError(f"the registry's answer for {ref} is not a manifest.")
    media = doc.get("mediaType") or ""
    if media in LIST_TYPES or (not media and isinstance(doc.get("manifests"), list)):
        found: dict[str, str] = {}
        for entry in doc.get("manifests") or []:
            arch = _arch_of(entry.get("platform")) if isinstance(entry, dict) else None
            digest = entry.get("digest") if isinstance(entry, dict) else None
            if arch and isinstance(digest, str) and DIGEST_RE.fullmatch(digest) and arch not in found:
                found[arch] = digest
        return found
    if media in SINGLE_TYPES or (not media and "config" in doc and "layers" in doc):
        return "sha256:" + hashlib.sha256(raw).hexdigest()
    raise LanekitError(f"the registry's answer for {ref} is a manifest of kind {media or 'unknown'!r}, which "
                       f"pin does not read (an image index or an image manifest, v2 or OCI); set "
                       f"upstream.digests by hand.")


def wanted_arches(spec: dict, asked: list[str] | None, implied: str | None = None) -> list[str]:
    """The architectures to pin: the ones asked for, else the ones the spec lists, else ``implied`` (the
    architecture the lane's hardware profile runs on: a spec recipe_lane wrote lists none yet)."""
    arches = list(asked or spec["upstream"]["digests"] or ([implied] if implied else []))
    unknown = [a for a in arches if a not in ARCHES]
    if unknown:
        raise LanekitError(f"pin_arches names {', '.join(unknown)}, which lanekit does not run on; use "
                           f"{' or '.join(ARCHES)}.")
    if not arches:
        raise LanekitError(f"{spec['spec_path']}: upstream.digests lists no architecture, so pin does not know which to "
                           f"pin; add the nodes' architecture (arm64: or amd64:) or pass -e pin_arches=arm64.")
    return arches


def pin_digests(spec: dict, found: dict[str, str] | str, arches: list[str]) -> dict[str, str]:
    """The digest per architecture in ``arches`` from ``manifest_digests``'s answer, or one sentence."""
    ref = f"{spec['upstream']['repository']}:{spec['upstream']['tag']}"
    if isinstance(found, str):
        if len(arches) > 1:
            raise LanekitError(f"{ref} is a single-architecture image (no manifest list), but {spec['spec_path']} pins "
                               f"{', '.join(arches)}; pin one architecture with -e pin_arches=ARCH, or use a "
                               f"multi-architecture tag.")
        # The manifest names no platform: the build checks the pulled base's architecture.
        return {arches[0]: found}
    missing = [a for a in arches if a not in found]
    if missing:
        offered = ", ".join(f"linux/{a}" for a in sorted(found)) or "no linux platform lanekit runs on"
        raise LanekitError(f"{ref} has no linux/{missing[0]} image (it offers {offered}); remove "
                           f"upstream.digests.{missing[0]} from {spec['spec_path']} or choose a tag built for it.")
    return {arch: found[arch] for arch in arches}


def overridden(spec: dict, overrides: Any, arches: list[str]) -> list[str]:
    """Sentences for the architectures lanekit_image_digests overrides: what pin writes there is not used."""
    mine = (overrides or {}).get(spec["name"]) if isinstance(overrides, dict) else None
    if not isinstance(mine, dict):
        return []
    return [f"lanekit_image_digests['{spec['name']}']['{arch}'] is set in the inventory and takes precedence over "
            f"{spec['spec_path']}: remove it there, or the plan keeps using {mine[arch]}."
            for arch in arches if mine.get(arch)]
