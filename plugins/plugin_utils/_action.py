# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The base of lanekit's action plugins.

One job: what every action plugin of the collection does the same way. It refuses options the
plugin does not have, checks the task's arguments against the plugin's ``ARGUMENT_SPEC`` (Ansible's
validator: a missing, unknown or mistyped option fails the task with Ansible's sentence), runs the
plugin's ``lanekit_run`` and turns an expected failure (``LanekitError``, or one of the plugin's
``EXPECTED_ERRORS``) into a failed result whose ``msg`` is the error's sentence, never a traceback.
Anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

from typing import Any, ClassVar

from ansible.plugins.action import ActionBase

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError


class LanekitAction(ActionBase):
    """Subclasses set ``ARGUMENT_SPEC`` and implement ``lanekit_run``."""

    TRANSFERS_FILES = False
    # The plugin's options, in Ansible's argument spec form (the module's DOCUMENTATION lists the same).
    ARGUMENT_SPEC: ClassVar[dict[str, Any]] = {}
    # Failures of the plugin's own core that also carry a sentence for the user.
    EXPECTED_ERRORS: ClassVar[tuple[type[Exception], ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # ActionBase.run refuses any other option before the plugin's code runs.
        cls._VALID_ARGS = frozenset(cls.ARGUMENT_SPEC)

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result: dict[str, Any] = super().run(tmp, task_vars)
        del tmp  # deprecated by Ansible, unused
        _validation, args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
        expected: tuple[type[Exception], ...] = (LanekitError, *self.EXPECTED_ERRORS)
        try:
            return self.lanekit_run(args, task_vars, result)
        except expected as err:
            result.update(failed=True, msg=str(err))
            return result
        finally:
            self.lanekit_cleanup(args)

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        """The plugin's work: fill ``result`` (Ansible's task result so far) and return it."""
        raise NotImplementedError

    def lanekit_cleanup(self, args: dict[str, Any]) -> None:
        """Run after ``lanekit_run``, also when it failed (remote temporary files, ...)."""
