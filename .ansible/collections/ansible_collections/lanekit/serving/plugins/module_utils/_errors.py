# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The one error type of lanekit.

Every expected failure (a bad lane file, an incomplete pin, a lint error) is raised as a
LanekitError whose message is the sentence the user reads: the file, the key, what was found,
what is expected and how to fix it. Plugins turn it into a task failure, never a traceback.
"""
from __future__ import annotations


class LanekitError(Exception):
    """A failure the user can fix; ``str(err)`` is the whole explanation."""

    def __init__(self, message: str, *, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = list(details or [])

    def __str__(self) -> str:
        if not self.details:
            return self.message
        return self.message + "\n" + "\n".join("  - " + line for line in self.details)
