#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Stage a checkpoint into the weights directory on the staging host: verified, resumable, atomic per file."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: weights_stage
short_description: Stage a checkpoint into a weights directory, verified, resumable and atomic per file
version_added: 0.1.0
description:
  - Copies a checkpoint from a Hugging Face repository pinned to a full commit (O(source=hf)) or from a
    local or mirror directory (O(source=local)) into O(dest), normally a directory on the NFS export every
    node mounts.
  - Every file is written under a temporary name inside C(<dest>/.lanekit/tmp) on the destination
    filesystem, hashed while it is written (a Hub download landing on the destination filesystem is hashed
    once after the client wrote it), compared with the digest the source vouches for (Hub LFS sha256, Hub
    blob id, or the source's own C(MANIFEST.json)/C(SHA256SUMS)), fsynced, recorded in a journal and only
    then renamed under its final name. Nothing partial ever carries a final name.
  - Symlinks in a local source (for example a Hugging Face cache snapshot, which is a symlink farm) are
    followed and the real file content is staged when they stay inside the source, or lead from a cache
    snapshot C(<repo>/snapshots/<rev>) into that cache's C(<repo>/blobs) (rsync C(--safe-links) style). A
    link that leads anywhere else (C(/etc/...), C(/)) is refused with a sentence naming it and its target,
    and nothing is staged. A dangling symlink in the source is an error.
  - The destination is resolved (C(..) and symlinks) before anything is written and, with O(root), must
    resolve to a directory below the resolved root. A symlink met inside the destination on the way to a
    file (including C(.lanekit)) is refused, so no write, rename or delete lands outside it.
  - The result carries C(MANIFEST.json) (path, size and sha256 per file, source, revision) and
    C(SHA256SUMS). The manifest is removed before the first file changes and written last, so a directory
    with a manifest is complete for that revision.
  - A killed run resumes where it stopped. The journal names every file already in place with its inode
    and mtime, so a re-run trusts those files without reading them. The unit of resume is the file, so a
    resumed run refetches only the files that were in flight.
  - A re-run with everything in place only stats the files and reports no change. O(verify=full) re-hashes
    every staged file and refetches only the files whose digest is wrong.
  - When O(dest) is a revision directory C(<model dir>/.revisions/<revision>) (the path the lane's plan
    publishes), the revision is staged there as a whole and, once complete, the symlink C(<model dir>/current)
    is switched to it atomically (a new link renamed over the old one). A running lane reads its own revision
    directory, so staging another revision never replaces a file under it, and a failed stage leaves
    C(current) and the previous revision as they were. A model directory staged before this layout (files
    directly in it) is migrated by hard-linking its files into the revision directory, without copying.
  - Run it once per lane on the staging host (the C(weights_staging) inventory group), never once per rank.
    Long stages should run with C(async).
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
requirements:
  - C(huggingface_hub) on the staging host, for O(source=hf) only.
options:
  dest:
    description:
      - The weights directory to fill, for example C(/mnt/nfs/models/<model dir>). Created if missing; its
        parent must exist.
    type: path
    required: true
  root:
    description:
      - The mounted weights export (C(lanekit_weights_root)). When given it must exist, O(dest) must resolve to a
        directory below it, and missing directories between the two are created. Without it the parent of
        O(dest) must exist.
    type: path
  source:
    description:
      - Where the checkpoint comes from.
      - V(hf) is a Hugging Face Hub repository (or a Hub-compatible mirror named by O(endpoint)) at the
        commit O(revision).
      - V(local) is a directory on the staging host named by O(local_path).
    type: str
    choices: [hf, local]
    required: true
  repo_id:
    description:
      - The Hub repository, for example C(mistralai/Mistral-Large-4-1T-A52B-NVFP4). Required for O(source=hf).
    type: str
  model_id:
    description:
      - The model id recorded in the manifest. Defaults to O(repo_id).
    type: str
  revision:
    description:
      - The full 40-hex commit to stage. Required for O(source=hf); a branch, tag or short hash is refused.
      - For O(source=local) it is recorded in the manifest and must agree with the revision of a
        C(MANIFEST.json) found in the source.
    type: str
  local_path:
    description:
      - The source directory for O(source=local).
    type: path
  endpoint:
    description:
      - A Hub-compatible endpoint (mirror) used instead of the public Hub, as E(HF_ENDPOINT) would.
    type: str
  token:
    description:
      - Hub access token, sent only to O(endpoint) (or the public Hub), and never over plain C(http://)
        other than to this machine's loopback.
      - Without it no token is sent at all, unless O(use_host_token) asks for the staging host's own.
    type: str
  use_host_token:
    description:
      - When O(token) is not given, send the token the Hub client finds on the staging host
        (E(HF_TOKEN), or the one C(hf auth login) saved under E(HF_HOME)).
      - Off by default, so a token saved on the host never reaches a mirror the lane names. The plain
        C(http://) and E(HF_ENDPOINT) refusals apply to it as to O(token).
    type: bool
    default: false
  allow_patterns:
    description:
      - Only files matching at least one of these fnmatch globs are staged (same meaning as in
        C(huggingface_hub)); a pattern ending in C(/) matches a whole folder.
    type: list
    elements: str
  ignore_patterns:
    description:
      - Files matching any of these globs are not staged.
    type: list
    elements: str
  verify:
    description:
      - V(quick) trusts files whose journal entry still matches their size, inode and mtime, and hashes
        only files nothing vouches for.
      - V(full) re-hashes every staged file and refetches the ones whose digest is wrong.
    type: str
    choices: [quick, full]
    default: quick
  workers:
    description:
      - Files fetched, copied or hashed in parallel.
    type: int
    default: 4
  block_size_mib:
    description:
      - Read and write block size in MiB.
    type: int
    default: 16
  retries:
    description:
      - Extra attempts per file for Hub downloads (network errors, digest mismatch), with exponential backoff.
    type: int
    default: 3
  retry_delay:
    description:
      - Seconds before the first retry; doubled on each further retry (at most 120).
    type: float
    default: 5.0
  scratch_dir:
    description:
      - Where the Hub client downloads before the copy. Defaults to C(<dest>/.lanekit/hf), on the destination
        filesystem, so a download is hashed and moved without a second copy. A directory on local disk is
        useful when the destination is an NFS mount the Hub client writes slowly to.
      - Made mode C(0700) if missing; an existing one owned by another user or writable by others (or under
        such a directory) is refused.
    type: path
  disable_xet:
    description:
      - Force plain HTTP downloads (E(HF_HUB_DISABLE_XET)), for mirrors that do not serve Xet.
    type: bool
    default: false
  prune:
    description:
      - Remove files in O(dest) that the staged checkpoint does not contain but that a previous stage of O(dest)
        put there (listed by its C(MANIFEST.json), or by the one a killed run set aside). Other extra files are
        never deleted; they are reported in RV(kept_extra_files). All extra files are reported in RV(extra_files).
      - Refused when another C(MANIFEST.json) lives in a directory below O(dest) (another model's directory).
    type: bool
    default: false
  in_use:
    description:
      - Every weights path a rank container on the lane's nodes reads (the containers' C(io.lanekit.weights)
        label), gathered by the weights role. With it, revisions of the model directory that nothing reads and
        that are neither the new nor the previous C(current) are removed after a successful stage (and the files
        of a pre-revision flat layout, once nothing reads the model directory itself).
      - Unset (the default), no revision is removed.
    type: list
    elements: str
  release_written_pages:
    description:
      - Release the pages of the files this module writes from the staging host's page cache once they are
        safely on disk (C(posix_fadvise DONTNEED) on those files only). Keeps a GB10 staging host from
        filling its unified memory with page cache.
    type: bool
    default: true
  direct_io:
    description:
      - Write the verified copy with C(O_DIRECT) where the destination's filesystem takes it, straight from the
        buffer that was hashed (no second copy into the page cache, no dirty pages to write back); the fsync stays.
        A filesystem that refuses it is written through the page cache.
      - V(false) writes through the page cache always (for an NFS export whose synchronous direct writes turn out
        slower than buffered ones on a high-latency link).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details:
      - Lists the source and stats the destination, and hashes (read-only) the files a real run would hash
        (files nothing vouches for, or every file with O(verify=full)); reports RV(would_fetch_bytes), the
        files it would fetch and the ones among them it would repair. Writes nothing.
  diff_mode:
    support: partial
    details:
      - The diff shows the revision and files digest before and after and the files to fetch, not file
        contents.
  idempotent:
    support: full
    details:
      - With everything in place a re-run only stats the files and reports no change; O(verify=full) reads
        every file but changes only the bad ones.
notes:
  - The Hub client (huggingface_hub 1.18 and later) does not resume a partial file across processes; this
    module retries per file and resumes per file through its journal.
  - Hashing belongs on the staging host. Nodes check the staged result with M(lanekit.serving.weights_verify),
    which never reads weight data.
seealso:
  - module: lanekit.serving.weights_verify
  - module: lanekit.serving.cache_warmth
"""

EXAMPLES = r"""
---
- name: Stage the lane's checkpoint from the Hub at its pinned commit
  lanekit.serving.weights_stage:
    dest: /mnt/nfs/models/mistralai/Mistral-Large-4-1T-A52B-NVFP4
    source: hf
    repo_id: mistralai/Mistral-Large-4-1T-A52B-NVFP4
    revision: 0123456789abcdef0123456789abcdef01234567
    allow_patterns: ["*.safetensors", "*.json"]
    token: "{{ vault_hf_token }}"
  async: 36000
  poll: 30

- name: Stage from a mirror directory on the staging host
  lanekit.serving.weights_stage:
    dest: /mnt/nfs/models/mistralai/Mistral-Large-4-1T-A52B-NVFP4
    source: local
    local_path: /srv/mirror/mistralai/Mistral-Large-4-1T-A52B-NVFP4
    model_id: mistralai/Mistral-Large-4-1T-A52B-NVFP4

- name: Re-hash everything and repair only the bad files
  lanekit.serving.weights_stage:
    dest: /mnt/nfs/models/mistralai/Mistral-Large-4-1T-A52B-NVFP4
    source: local
    local_path: /srv/mirror/mistralai/Mistral-Large-4-1T-A52B-NVFP4
    verify: full
"""

RETURN = r"""
path:
  description: The staged directory (O(dest) resolved).
  returned: always
  type: str
revision:
  description: The revision recorded in the manifest.
  returned: always
  type: str
files_total:
  description: Number of files in the staged checkpoint.
  returned: always
  type: int
bytes_total:
  description: Total size of the staged checkpoint.
  returned: always
  type: int
files_fetched:
  description: Files fetched or copied by this run.
  returned: always
  type: int
bytes_fetched:
  description: Bytes fetched or copied by this run.
  returned: always
  type: int
files_hashed:
  description: Files already present that this run hashed (not vouched for by the journal, or O(verify=full)).
  returned: success
  type: int
bytes_hashed:
  description: Bytes of those files.
  returned: success
  type: int
repaired:
  description: Files found present but wrong and fetched again.
  returned: success and not check mode
  type: list
  elements: str
mismatches:
  description: Files whose digest did not match what was expected when hashed.
  returned: success
  type: list
  elements: str
extra_files:
  description: Files in the destination that the checkpoint does not contain.
  returned: always
  type: list
  elements: str
kept_extra_files:
  description: With O(prune=true), the extra files left in place because no previous manifest of O(dest) listed them.
  returned: always
  type: list
  elements: str
would_prune_files:
  description: Extra files a real run with O(prune=true) would remove.
  returned: check mode
  type: list
  elements: str
pruned:
  description: Extra files removed (O(prune=true)).
  returned: success and not check mode
  type: list
  elements: str
would_fetch_bytes:
  description: Bytes a real run would fetch.
  returned: check mode
  type: int
would_fetch_files:
  description: Files a real run would fetch.
  returned: check mode
  type: list
  elements: str
would_repair_files:
  description: Files present but with a wrong digest, which a real run would fetch again.
  returned: check mode
  type: list
  elements: str
manifest_sha256:
  description: sha256 of the written C(MANIFEST.json).
  returned: success and not check mode
  type: str
files_digest:
  description: sha256 over the sorted path, size and sha256 of every file; identifies the staged content.
  returned: success and not check mode
  type: str
phases:
  description: Per phase (plan, verify, fetch, publish) the files, bytes, seconds and GiB/s.
  returned: always
  type: dict
  sample:
    fetch: {files: 12, bytes: 4294967296, seconds: 5.1, gib_per_s: 0.78}
    verify: {files: 0, bytes: 0, seconds: 0.0, gib_per_s: 0.0}
files:
  description: Every file that was not simply in place, with the action taken and why.
  returned: always
  type: list
  elements: dict
revisions:
  description:
    - For a revision directory O(dest), the layout after the run, C(model_dir), C(current) (the revision
      C(current) names), C(previous) (the one it named before), C(migrated_files) (hard-linked from a
      pre-revision layout), C(removed_revisions) and C(removed_legacy_files) (with O(in_use)).
  returned: when O(dest) is a revision directory
  type: dict
huggingface_hub_version:
  description: Version of the Hub client used (O(source=hf)).
  returned: always
  type: str
"""

import os
import traceback
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from ansible.module_utils.basic import AnsibleModule, missing_required_lib  # noqa: E402

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError  # noqa: E402
from ansible_collections.lanekit.serving.plugins.module_utils._weights import _stage_revisions as revs  # noqa: E402
from ansible_collections.lanekit.serving.plugins.module_utils._weights._pagecache_sys import MIB  # noqa: E402
from ansible_collections.lanekit.serving.plugins.module_utils._weights._stage_sources import (  # noqa: E402
    HubSource,
    LocalSource,
    Source,
)
from ansible_collections.lanekit.serving.plugins.module_utils._weights._staging import Stager  # noqa: E402

try:
    # Imported for real by HubSource when source=hf; here only to fail early with a sentence.
    import huggingface_hub  # noqa: F401  # pylint: disable=unused-import
    HAS_HF = True
    HF_IMPORT_ERROR = None
except ImportError:
    HAS_HF = False
    HF_IMPORT_ERROR = traceback.format_exc()


def argument_spec() -> dict[str, Any]:
    return dict(
        dest=dict(type="path", required=True),
        root=dict(type="path"),
        source=dict(type="str", required=True, choices=["hf", "local"]),
        repo_id=dict(type="str"),
        model_id=dict(type="str"),
        revision=dict(type="str"),
        local_path=dict(type="path"),
        endpoint=dict(type="str"),
        token=dict(type="str", no_log=True),
        use_host_token=dict(type="bool", default=False),
        allow_patterns=dict(type="list", elements="str"),
        ignore_patterns=dict(type="list", elements="str"),
        verify=dict(type="str", default="quick", choices=["quick", "full"]),
        workers=dict(type="int", default=4),
        block_size_mib=dict(type="int", default=16),
        retries=dict(type="int", default=3),
        retry_delay=dict(type="float", default=5.0),
        scratch_dir=dict(type="path"),
        disable_xet=dict(type="bool", default=False),
        prune=dict(type="bool", default=False),
        in_use=dict(type="list", elements="str"),
        release_written_pages=dict(type="bool", default=True),
        direct_io=dict(type="bool", default=True),
    )


def stage(p: dict[str, Any], check_mode: bool, warn: Callable[[str], None]) -> dict[str, Any]:
    """Stage O(dest); for a revision directory also migrate, switch C(current) and remove unread revisions."""
    dest = p["dest"].rstrip("/") or "/"
    parts = revs.split_revision_path(dest)
    if parts is None:
        return build_stager(p, check_mode, warn).run()
    model_dir, key = parts
    if p["revision"] not in (None, "") and revs.revision_key(p["revision"]) != key:
        raise LanekitError(f"The weights path {dest} names revision {key} but the lane pins {p['revision']}; "
                           "stage the path the lane's plan publishes.")
    if p["revision"] in (None, "") and key != revs.UNPINNED:
        raise LanekitError(f"The weights path {dest} names revision {key} but the lane pins none; stage the path the "
                           "lane's plan publishes.")
    revs.check_layout(model_dir, p["root"])  # before the first link or write, not only in the Stager
    migrated = revs.migrate_legacy(model_dir, key, p["revision"], check_mode) if os.path.isdir(model_dir) else []
    if check_mode and migrated:
        # a real run links these files instead of fetching them: plan against where they are now
        result = build_stager(dict(p, dest=model_dir), check_mode, warn).run()
        result["path"] = dest
        result["extra_files"] = [e for e in result["extra_files"] if e not in migrated]
    else:
        if not check_mode:
            os.makedirs(os.path.join(model_dir, revs.REVISIONS_DIR), mode=0o755, exist_ok=True)
        result = build_stager(p, check_mode, warn).run()
    previous = revs.switch_current(model_dir, key, check_mode)
    removed: list[str] = []
    legacy: list[str] = []
    if p["in_use"] is not None and os.path.isdir(model_dir):
        removed, legacy = revs.collect_garbage(model_dir, {key, previous or key}, p["in_use"], check_mode)
    result["revisions"] = {"model_dir": model_dir, "current": key, "previous": previous,
                           "migrated_files": migrated, "removed_revisions": removed, "removed_legacy_files": legacy}
    result["changed"] = bool(result.get("changed") or previous != key or migrated or removed or legacy)
    return result


def build_stager(p: dict[str, Any], check_mode: bool, warn: Callable[[str], None]) -> Stager:
    """The Stager for the module's parameters (the source, the destination, the knobs)."""
    if p["workers"] < 1 or p["block_size_mib"] < 1:
        raise LanekitError("workers and block_size_mib must be at least 1.")
    source: Source
    if p["source"] == "hf":
        source = HubSource(p["repo_id"], p["revision"], endpoint=p["endpoint"], token=p["token"],
                           allow_patterns=p["allow_patterns"], ignore_patterns=p["ignore_patterns"],
                           disable_xet=p["disable_xet"], use_host_token=p["use_host_token"])
    else:
        source = LocalSource(p["local_path"], allow_patterns=p["allow_patterns"],
                             ignore_patterns=p["ignore_patterns"])
    return Stager(source, p["dest"].rstrip("/") or "/", model_id=p["model_id"] or p["repo_id"],
                  revision=p["revision"], verify=p["verify"], workers=p["workers"],
                  block_size=p["block_size_mib"] * MIB, retries=p["retries"], retry_delay=p["retry_delay"],
                  scratch_dir=p["scratch_dir"], check_mode=check_mode, prune=p["prune"],
                  release_written_pages=p["release_written_pages"], direct_io=p["direct_io"], warn=warn,
                  root=p["root"].rstrip("/") if p["root"] else None)


def main() -> None:
    module = AnsibleModule(
        argument_spec=argument_spec(),
        required_if=[("source", "hf", ("repo_id", "revision")), ("source", "local", ("local_path",))],
        supports_check_mode=True,
    )
    p = module.params
    if p["source"] == "hf" and not HAS_HF:
        module.fail_json(msg=missing_required_lib("huggingface_hub"), exception=HF_IMPORT_ERROR)
    try:
        result = stage(p, module.check_mode, module.warn)
    except LanekitError as exc:
        module.fail_json(msg=str(exc))
    except OSError as exc:
        module.fail_json(msg=f"Staging into {p['dest']} failed: {exc.strerror or exc} ({exc.filename or p['dest']}).")
    extras = result.get("extra_files")
    if extras:
        more = ", ..." if len(extras) > 5 else ""
        if result.get("kept_extra_files"):
            fix = (f"; {len(result['kept_extra_files'])} of them kept because no previous manifest of this directory "
                   "lists them (lanekit did not put them there): remove them by hand if they are not needed")
        elif result.get("pruned") or result.get("would_prune_files"):
            fix = "; removed" if result.get("pruned") else "; prune would remove them"
        else:
            fix = "; prune=true removes those a previous stage put there"
        module.warn(f"{len(extras)} file(s) in {p['dest']} are not part of the staged checkpoint "
                    f"({', '.join(extras[:5])}{more}){fix}.")
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
