# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The module side of the docker CLI: what the image modules' ``main()`` and managers share.

Each image module is a thin ``main()`` over a manager class, as in community.docker: ``main()``
declares the module's own options and hands them to :func:`run_docker_module`, which adds the
common ``docker_cli`` option, binds a :class:`DockerCLI` to the AnsibleModule, runs the manager
and turns an expected failure into ``fail_json``. The manager's ``run()`` only returns the result
or raises a :class:`LanekitError`, so it can be tested with a fake module and a docker in memory.

This lives apart from ``_docker_cli`` so that the CLI wrapper and the stream protocol stay free of
``AnsibleModule`` (they take any object with ``run_command``).
"""
from __future__ import annotations

import json
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import (
    LABEL_CONTENT_HASH,
    DockerCLI,
    chain_ids,
    image_pin,
    pin_mismatch,
)
from ansible_collections.lanekit.serving.plugins.module_utils._image._layers import (
    held_prefix,
    layer_sizes,
    parse_history,
)


def docker_argument_spec(options: dict) -> dict:
    """``options`` plus the ``docker_cli`` option every image module takes.

    Added here, like community.docker's DOCKER_COMMON_ARGS, so the modules cannot drift apart; it is
    documented once too, by the doc fragment ``lanekit.serving.docker_cli`` each module extends.
    ``options`` is copied, not extended, so a caller's dict never gains the option behind its back.
    """
    spec = dict(options)
    spec["docker_cli"] = dict(type="path")
    return spec


def pin_options(content_hash_required: bool = True) -> dict:
    """The options that name an image and the pin it must carry: ``ref``, ``content_hash``, ``rootfs``, ``config``.

    :meth:`DockerManager.inspect_pin` and :meth:`DockerManager.pin_problem` read exactly these, so
    they are declared once, here. Only image_info takes ``content_hash`` as optional (it then only
    reports the pin).
    """
    return dict(
        ref=dict(type="str", required=True),
        content_hash=dict(type="str", required=True) if content_hash_required else dict(type="str"),
        rootfs=dict(type="str"),
        config=dict(type="str"),
    )


class DockerManager:
    """Base of the image modules' managers: the module, its docker CLI and the pin look-ups.

    A subclass implements :meth:`run` and may override :meth:`docker_env`.
    """

    def __init__(self, module: AnsibleModule, docker: DockerCLI) -> None:
        self.module = module
        self.docker = docker
        self.params = module.params
        self.check_mode = module.check_mode
        self.host = docker.host

    @staticmethod
    def docker_env(params: dict) -> dict:
        """Environment for every docker command the module runs; called before the CLI is bound."""
        return {}

    def run(self) -> dict:
        """Do the module's work; return its result, raise LanekitError for an expected failure."""
        raise NotImplementedError

    def inspect_pin(self, ref: str | None = None) -> dict:
        """The pin of ``ref`` (default: the ``ref`` option) on this host; empty values when absent."""
        return image_pin(self.docker.inspect_image(self.params["ref"] if ref is None else ref))

    def local_copy(self) -> str:
        """Id of a local image that carries the wanted pin under another name (or none), so a
        missing tag is repaired by re-tagging instead of a transfer."""
        if not self.params.get("content_hash"):
            return ""
        for image_id in self.docker.images_with_label(LABEL_CONTENT_HASH, self.params["content_hash"]):
            if not self.pin_problem(self.inspect_pin(image_id)):
                return image_id
        return ""

    def present_chains(self) -> list:
        """Chain IDs of every layer stack the local images hold (empty if they cannot be listed)."""
        try:
            _rc, out, _err = self.docker.run(["image", "ls", "--all", "--quiet", "--no-trunc"], record=False)
            ids = sorted({line.strip() for line in out.splitlines() if line.strip()})
            if not ids:
                return []
            rc, out, _err = self.docker.run(["image", "inspect"] + ids, check=False, record=False)
            images = json.loads(out) if rc == 0 else []
        except (LanekitError, ValueError):
            return []
        chains = set()
        for image in images if isinstance(images, list) else []:
            chains.update(chain_ids(((image or {}).get("RootFS") or {}).get("Layers") or []))
        return sorted(chains)

    def held_layers(self, layers: list) -> int:
        """How many bottom layers of ``layers`` (an image's ``RootFS.Layers``) this node holds."""
        return held_prefix(chain_ids(layers), self.present_chains()) if layers else 0

    def layer_sizes(self, ref: str, layers: list) -> list:
        """Bytes of each of ``ref``'s ``layers``, bottom first, from ``docker image history``; [] when
        the history cannot be read or matched to the layers (the caller then knows no sizes)."""
        if not layers:
            return []
        rc, out, _err = self.docker.run(["image", "history", "--human=false", "--format", "{{.Size}} {{json .CreatedBy}}", ref],
                                        check=False, record=False)
        return layer_sizes(parse_history(out), len(layers)) if rc == 0 else []

    def pin_problem(self, pin: dict) -> str | None:
        """Why ``pin`` is not the image the ``content_hash``, ``rootfs`` and ``config`` options ask for, or None."""
        return pin_mismatch(pin, self.params["content_hash"], self.params["rootfs"], self.params.get("config"))


def run_docker_module(manager_class: type[DockerManager], options: dict, **module_kwargs: Any) -> None:
    """The whole ``main()`` of an image module: parse ``options`` (plus ``docker_cli``), run the
    manager and exit with its result.

    Every image module supports check mode, so that is not an argument. ``module_kwargs`` go to
    AnsibleModule as they are (``required_if``, ...).
    """
    module = AnsibleModule(argument_spec=docker_argument_spec(options), supports_check_mode=True, **module_kwargs)
    try:
        # Inside the try: a docker CLI that cannot be found is a sentence for the user too.
        docker = DockerCLI(module, module.params["docker_cli"], env=manager_class.docker_env(module.params))
        result = manager_class(module, docker).run()
    except LanekitError as err:
        # DockerError is a LanekitError: its message already names the command, the host and docker's words.
        module.fail_json(msg=str(err))
    module.exit_json(**result)
