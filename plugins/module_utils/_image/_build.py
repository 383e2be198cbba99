# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""What ``image_build`` will do for one image on one builder, and why: the pure decision.

No docker and no files: from the resolved image spec, the pin now under its reference and the
rebuild policy, decide build / restore / keep, the build context and argv, and where to push.
The module (``plugins/modules/image_build.py``) executes the decision.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ansible_collections.lanekit.serving.plugins.module_utils._image._spec import IMAGE_REPOSITORY_PREFIX


@dataclass(frozen=True)
class BuildPlan:
    """What the module will do for one image on one builder, and why.

    ``action`` is V(build), V(restore) (pull the locked image back from ``restore_from``; a failed
    restore falls back to a build) or V(keep). ``warning`` is said to the user when a stale image
    is kept on purpose. ``push_target`` is empty when nothing is pushed.
    """

    action: str
    reason: str
    context: str
    build_args: tuple
    warning: str = ""
    push_repository: str = ""
    push_target: str = ""


def decide_action(ref: str, content_hash: str, host: str, pin_before: dict, rebuild: str,
                  restore_from: str) -> tuple[str, str, str]:
    """(action, reason, warning) from the image now under ``ref`` and the rebuild policy."""
    if rebuild == "always":
        return "build", "rebuild is always", ""
    if not pin_before["present"]:
        return ("restore" if restore_from else "build"), f"{ref} is not present on {host}", ""
    found = pin_before["content_hash"][:12] or "none"
    if pin_before["content_hash"] != content_hash:
        if rebuild == "never":
            return ("keep", f"{ref} exists on {host} with content hash {found} and rebuild is never",
                    f"{ref} on {host} does not carry content hash {content_hash[:12]}; kept because rebuild is never.")
        return "build", f"{ref} on {host} carries content hash {found}, not {content_hash[:12]}", ""
    return "keep", f"{ref} is present on {host} with content hash {content_hash[:12]}", ""


def build_root(params: dict, resolved: dict) -> str:
    """The directory the build contexts are made in: ``build_dir``, else ``<images_dir>/.build/<name>``."""
    return params["build_dir"] or os.path.join(params["images_dir"], ".build", resolved["name"])


def context_dir(params: dict, resolved: dict) -> str:
    """The build context directory as planned (shown in check mode): one per content hash under ``build_dir``.

    The module builds in a fresh ``mkdtemp`` directory under the checked build root instead (``build_argv``
    with that directory), so no path another user could have prepared is ever built from.
    """
    return os.path.join(build_root(params, resolved), resolved["content_hash"][:12])


def build_argv(ref: str, context: str) -> tuple:
    """``docker build`` arguments for ``ref`` from the context directory ``context``."""
    return ("build", "--tag", ref, "--file", os.path.join(context, "Dockerfile"), context)


def push_names(registry: str, resolved: dict) -> tuple[str, str]:
    """(repository, tag reference) of the image in ``registry``; empty without a registry."""
    if not registry:
        return "", ""
    repository = f"{registry.rstrip('/')}/{IMAGE_REPOSITORY_PREFIX}{resolved['name']}"
    return repository, f"{repository}:{resolved['content_hash'][:12]}"


def decide(params: dict, resolved: dict, pin_before: dict, host: str) -> BuildPlan:
    """The whole decision for ``resolved`` given the pin now under its reference."""
    action, reason, warning = decide_action(resolved["ref"], resolved["content_hash"], host, pin_before,
                                            params["rebuild"], params["restore_from"])
    context = context_dir(params, resolved)
    repository, target = push_names(params["registry"], resolved)
    return BuildPlan(action=action, reason=reason, warning=warning, context=context,
                     build_args=build_argv(resolved["ref"], context),
                     push_repository=repository, push_target=target)
