"""The runner for a recorded node (`check --root`): it runs nothing, so every probe reads the
recorded files or says why it cannot."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from distdoctor.knowledge.i18n import t

from .runner import CommandResult


class OfflineRunner:
    """Refuses every command: the node being read is a folder, not this machine."""

    def __call__(self, argv: Sequence[str], *, timeout: float,
                 env: Mapping[str, str] | None = None) -> CommandResult:
        argv = tuple(argv)
        return CommandResult(argv, None, "", "", 0.0,
                             t("{command}: not run (reading a recorded node, not this machine)",
                               command=argv[0] if argv else "?"))
