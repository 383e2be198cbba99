# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The image spec's keys for people: docs/image-schema.md is generated from this table.

One job: say, per key of ``images/<name>/image.yml``, its type, whether it is required and what it
means. The validation is ``module_utils/_image/_spec.load_image_spec`` (it travels to the nodes, so
the words live here); a unit test holds the top-level keys here equal to the ones it accepts
(``_spec._SPEC_KEYS``) and the architectures to ``_spec.ARCHES``.
"""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.module_utils._image._spec import ARCHES, LABEL_PREFIX

# (key, type, required, meaning); nested keys dotted, list items as [].
SPEC_DOC: tuple[tuple[str, str, bool, str], ...] = (
    ("name", "text", True, "the image's name: the directory name under images/ (lower-case letters, digits, '.', '_', '-')"),
    ("description", "text", False, "one line for people"),
    ("upstream", "mapping", True, "the image the build starts FROM, pinned by digest"),
    ("upstream.repository", "text", True, "the upstream repository (vllm/vllm-openai), no spaces"),
    ("upstream.tag", "text", True, "the tag the digests were pinned for; the digest, not the tag, chooses the image "
     "(the lock records the tag, so a changed tag with the old digest is refused)"),
    ("upstream.digests", "mapping", True, "architecture -> the full digest of upstream.repository:upstream.tag for it "
     "(lanekit_image_digests in the inventory takes precedence; lanekit.serving.pin writes them)"),
    *((f"upstream.digests.{arch}", "text or null", False, f"'sha256:' and 64 hex characters for linux/{arch}; null or "
       f"a truncated digest is refused by a build or deploy with the variable to set") for arch in ARCHES),
    ("entrypoint", "list of text", True, "the program the image runs (for example [vllm, serve]); never empty"),
    ("patches", "list of mappings", False, "Python scripts copied into the image and run with python3 at build time, "
     "in order; each checks the code it patches and fails the build when that is missing or already different"),
    ("patches[].file", "text", True, "the patch's path under images/<name>/ (a link out of the folder is refused)"),
    ("patches[].target", "text", False, "what the patch changes, for people"),
    ("patches[].description", "text", False, "why, for people"),
    ("build_args", "mapping", False, "Dockerfile ARG name -> a string or number of one line"),
    ("labels", "mapping", False, f"image label -> one line of text; the {LABEL_PREFIX}.* labels are lanekit's own"),
    ("lanes", "list of text", False, "the lanes that use the image, for people"),
)
