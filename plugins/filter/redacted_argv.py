# Copyright: lanekit developers
# Apache-2.0
"""The filter redacted_argv: a rank's docker run argv as it may be printed (module_utils/_redact.py is the one rule)."""
from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.lanekit.serving.plugins.module_utils._redact import redact_shown_argv


def redacted_argv(argv: Any) -> list[str]:
    if not isinstance(argv, (list, tuple)):
        raise AnsibleFilterError(f"redacted_argv needs an argv list, got {type(argv).__name__}.")
    return [str(word) for word in redact_shown_argv(list(argv))]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"redacted_argv": redacted_argv}
