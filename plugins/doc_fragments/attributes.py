# Copyright: lanekit developers
# Apache-2.0
"""What the standard module attributes mean, written once for every lanekit.serving module.

Each module says how far it supports an attribute (``support``, ``details``) and extends this
fragment for the attribute's description, as community.docker does with its ``attributes`` fragment.
"""
from __future__ import annotations


class ModuleDocFragment:
    """The descriptions of check_mode, diff_mode and idempotent."""

    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in C(check_mode) and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in C(check_mode)), when in diff mode.
  idempotent:
    description:
      - When run twice in a row outside check mode, with the same arguments, the second invocation indicates no change.
      - This assumes that the system controlled/queried by the module has not changed in a relevant way.
"""
