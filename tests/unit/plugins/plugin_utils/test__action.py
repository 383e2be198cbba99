"""plugin_utils/_action.py, the base of every action plugin: the argument check, an expected
failure as a failed result with its sentence (never a traceback), the cleanup hook, and that
every action plugin of the collection uses it."""
from __future__ import annotations

import importlib
import os

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction
from tests.unit.helpers.lane_fakes import action_module
from tests.unit.helpers.recipes import REPO


class OwnError(Exception):
    pass


class Probe(LanekitAction):
    ARGUMENT_SPEC = {"lane": {"type": "str", "required": True}, "count": {"type": "int", "default": 1}}
    EXPECTED_ERRORS = (OwnError,)

    def lanekit_run(self, args, task_vars, result):
        self.cleaned = False
        if args["lane"] == "refused":
            raise LanekitError("lane refused is refused: rename it in lanes/refused.yml.")
        if args["lane"] == "own":
            raise OwnError("the plugin's own sentence.")
        if args["lane"] == "bug":
            raise KeyError("bug")
        result.update(changed=False, lane=args["lane"], count=args["count"], seen=task_vars.get("x"))
        return result

    def lanekit_cleanup(self, args):
        self.cleaned = True


def run(args, task_vars=None):
    plugin = action_module(Probe, args)
    return plugin, plugin.run(task_vars=task_vars)


def test_the_arguments_arrive_checked_and_with_their_defaults():
    plugin, out = run({"lane": "demo", "count": "3"}, {"x": 1})
    assert (out["lane"], out["count"], out["seen"]) == ("demo", 3, 1)
    assert not out.get("failed") and plugin.cleaned


def test_no_task_vars_is_an_empty_mapping():
    _plugin, out = run({"lane": "demo"})
    assert out["seen"] is None


@pytest.mark.parametrize("args", [{}, {"lane": "demo", "colour": "red"}, {"lane": "demo", "count": "many"}])
def test_a_missing_unknown_or_mistyped_option_fails_the_task(args):
    with pytest.raises(AnsibleActionFail):
        run(args)


def test_unknown_options_are_refused_before_the_plugin_runs():
    assert Probe._VALID_ARGS == frozenset({"lane", "count"})


@pytest.mark.parametrize(("lane", "sentence"), [
    ("refused", "lane refused is refused: rename it in lanes/refused.yml."),
    ("own", "the plugin's own sentence."),
])
def test_an_expected_failure_is_a_failed_result_with_the_sentence_and_cleans_up(lane, sentence):
    plugin, out = run({"lane": lane})
    assert out["failed"] is True and out["msg"] == sentence
    assert plugin.cleaned


def test_a_bug_keeps_its_traceback_and_still_cleans_up():
    plugin = action_module(Probe, {"lane": "bug"})
    with pytest.raises(KeyError):
        plugin.run(task_vars={})
    assert plugin.cleaned


def test_every_action_plugin_of_the_collection_is_a_lanekit_action():
    names = sorted(f[:-3] for f in os.listdir(os.path.join(REPO, "plugins", "action")) if f.endswith(".py"))
    assert len(names) >= 15
    for name in names:
        module = importlib.import_module(f"ansible_collections.lanekit.serving.plugins.action.{name}")
        assert issubclass(module.ActionModule, LanekitAction), name
        assert module.ActionModule.ARGUMENT_SPEC is module.ARGUMENT_SPEC, name
        assert "def run(" not in open(module.__file__, encoding="utf-8").read(), name
