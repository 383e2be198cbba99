# Copyright: lanekit developers
# Apache-2.0
"""Copy one node's teardown evidence into the controller's archive folder, private and redacted.

One job: the files ``lanekit.serving.rank_status`` wrote with ``bundle_dir`` on a node (each
container's full log and ``docker inspect``, the node's meminfo) go to
``<archive>/ranks/r<rank>-<host>/{full.log,inspect.json}`` and ``<archive>/hosts/<host>/meminfo.txt``,
read as the become user, written 0600 in 0700 directories, with every known secret value of the
lane (``lanekit_api_key``, ``lanekit_secret_env``) replaced again on the controller: the node
redacted them already, this is the second lock (``plugin_utils/_boot/_bundle.py``, as the failure
bundle of ``lane_wait``). The documentation lives in plugins/modules/archive_fetch.py.
"""
from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.lanekit.serving.plugins.plugin_utils import _become_files as becomefiles
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._bundle import Bundle, secret_args

ARGUMENT_SPEC = dict(
    dest=dict(type="path", required=True),
    files=dict(type="list", elements="str", required=True),
    containers=dict(type="list", elements="dict", default=[]),
    plan=dict(type="dict", default={}),
)


def archive(bundle: Bundle, host: str, containers: list[dict[str, Any]], files: list[str],
            fetch: Any) -> list[str]:
    """Fetch every rank's log and inspect, and the host's meminfo, into ``bundle``; the paths written."""
    written: list[str] = []
    for container in containers:
        rank = container.get("rank")
        written += bundle.fetch_rank_files("x" if rank is None else rank, host, str(container["name"]), files, fetch)
    written += bundle.fetch_host_files(host, files, fetch)
    return written


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        secrets = secret_args(self._templar.template, task_vars, args["plan"] or {})
        values = [v for v in [secrets.get("api_key"), *secrets.get("secret_values", [])] if v]
        # A relative folder is the playbook's, as ansible.builtin.fetch takes it.
        bundle = Bundle(self._loader.path_dwim(args["dest"]), values)
        host = str(task_vars.get("inventory_hostname") or "")

        def fetch(remote: str, local: str) -> None:
            becomefiles.fetch(self, task_vars, remote, local)

        try:
            written = archive(bundle, host, args["containers"], args["files"], fetch)
        except AnsibleError as exc:
            result.update(failed=True, msg=f"The teardown archive of {host} could not be copied to {args['dest']}: "
                                           f"{to_text(exc)}")
            return result
        result.update(changed=bool(written), files=written, redacted_values=len(values))
        return result
