# Copyright: lanekit developers
# Apache-2.0
"""Print every rank's log lines in one time-ordered stream, live or from an archived bundle.

One job: on the controller, gather each rank's lines (the ``lanekit.serving.rank_status`` results
every node registered, or the ``ranks/r<rank>-<host>/full.log`` files of a failure bundle or
teardown archive), then merge, filter and fold them with ``_logmerge`` and print them. No host
is contacted. The documentation lives in plugins/modules/lane_logs.py.
"""
from __future__ import annotations

import glob
import os
import time
from collections.abc import Mapping
from typing import Any

from ansible.utils.display import Display

from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import split_timestamp
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _logmerge as logmerge

display = Display()

ARGUMENT_SPEC = dict(
    lane=dict(type="str", required=True),
    found=dict(type="dict", default={}),
    ranks=dict(type="raw"),
    # raw: '-5' and 'all' are refused with a sentence by _logmerge.parse_lines, not cast to -5 or 0.
    lines=dict(type="raw"),
    since=dict(type="str"),
    grep=dict(type="str"),
    fold=dict(type="bool", default=True),
    from_archive=dict(type="str", default=""),
    reports_dir=dict(type="str"),
    # Only check the options (the playbook's first task, before any node is contacted).
    check_only=dict(type="bool", default=False),
)


def live_streams(found: Mapping[str, Any]) -> tuple[dict[tuple[int, str], list[str]], list[str]]:
    """({(rank, host): lines} from each host's registered rank_status result, notes on hosts that gave none)."""
    streams: dict[tuple[int, str], list[str]] = {}
    notes: list[str] = []
    for host in sorted(found):
        res = found[host] or {}
        if res.get("unreachable"):
            why = str(res.get("msg") or "no answer").splitlines() or ["no answer"]
            notes.append(f"{host}: unreachable ({why[0][:160]})")
            continue
        if res.get("failed"):
            notes.append(f"{host}: {str(res.get('msg') or 'rank_status failed').splitlines()[0]}")
            continue
        for entry in res.get("containers") or []:
            if not entry.get("exists") or entry.get("rank") is None:
                continue
            streams[(int(entry["rank"]), host)] = list(entry.get("lines") or [])
            if entry.get("log_error"):
                notes.append(f"{host} r{entry['rank']}: {entry['log_error']}")
    return streams, notes


def archive_dir(lane: str, from_archive: str, reports_dir: str) -> str:
    """The bundle folder: ``latest`` is the newest one under reports/<lane>/ holding rank logs."""
    if from_archive != "latest":
        path = os.path.abspath(os.path.expanduser(from_archive))
        if not glob.glob(os.path.join(path, "ranks", "*", "full.log")):
            raise logmerge.LogOptionError(f"{path} holds no ranks/r<rank>-<host>/full.log; pass a failure bundle or "
                                          f"teardown archive folder of reports/{lane}/, or logs_from_archive=latest.")
        return path
    root = os.path.join(reports_dir, lane)
    bundles = sorted({os.path.dirname(os.path.dirname(os.path.dirname(p)))
                      for p in glob.glob(os.path.join(root, "*", "ranks", "*", "full.log"))})
    if not bundles:
        raise logmerge.LogOptionError(f"No archived rank logs under {root}; a failed deploy or a teardown writes them "
                                      "there, or pass logs_from_archive=PATH.")
    # The folders are named <UTC timestamp>[-reason]: the last in name order is the newest.
    return bundles[-1]


def archive_streams(path: str) -> dict[tuple[int, str], list[str]]:
    streams: dict[tuple[int, str], list[str]] = {}
    for log in sorted(glob.glob(os.path.join(path, "ranks", "*", "full.log"))):
        key = logmerge.archived_rank(os.path.basename(os.path.dirname(log)))
        if key is None:
            continue
        with open(log, encoding="utf-8", errors="replace") as handle:
            streams[key] = handle.read().splitlines()
    return streams


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    # Controller only: the lines come from the nodes' registered results or an archive.
    _requires_connection = False

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        options = logmerge.check_options(lines=args.get("lines"), ranks=args.get("ranks"),
                                         since=args.get("since"), grep=args.get("grep"))
        if args["check_only"]:
            result.update(changed=False, msg="the logs options are valid", lines=options["lines"],
                          ranks=options["ranks"])
            return result
        ranks, since_s, grep = options["ranks"], options["since_s"], options["grep"]
        notes: list[str] = []
        source = "live containers"
        if args["from_archive"]:
            reports = args.get("reports_dir") or os.path.join(os.getcwd(), "reports")
            source = archive_dir(args["lane"], args["from_archive"], reports)
            streams = archive_streams(source)
            # An archive's "now" is its last line: logs_since= counts back from the end of the log.
            stamps = [split_timestamp(raw[-1])[0] for raw in streams.values() if raw]
            known = [ts for ts in stamps if ts is not None]
            now = max(known) if known else time.time()
        else:
            streams, notes = live_streams(args["found"])
            now = time.time()
        missing = logmerge.missing_ranks(ranks, streams, notes) if streams else None
        if missing:
            result.update(failed=True, msg=f"logs of lane {args['lane']} ({source}): {missing}")
            return result
        merged = logmerge.merge(streams, ranks=ranks, lines=options["lines"], since_s=since_s, now=now, grep=grep,
                                folding=args["fold"])
        shown = sorted({k[0] for k in streams if ranks is None or k[0] in ranks})
        header = f"logs of lane {args['lane']} ({source}): {len(merged)} lines from {len(shown)} ranks"
        out = [header] + [f"note: {n}" for n in notes] + [line.render() for line in merged]
        for line in out:
            display.display(line)
        result.update(changed=False, lines=[line.render() for line in merged], source=source, notes=notes,
                      ranks=shown, msg=header)
        if not streams:
            result.update(failed=True, msg=f"No rank log of lane {args['lane']} found ({source}); "
                                           + ("; ".join(notes) if notes else "is the lane deployed?"))
        return result
