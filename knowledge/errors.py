"""The errors distdoctor raises on purpose: bad input (InputError, the base of every such error)
and a broken knowledge file (KnowledgeError)."""
from __future__ import annotations


class InputError(Exception):
    """Bad input: an option, a file, a dump, a host list, a session. The command line prints its
    message as one line and exits 2; that mapping is in one place (tui/cli.py:main), so a command
    lets these propagate instead of catching and re-raising them."""


class KnowledgeError(Exception):
    """A broken knowledge file: which file, which key, and why."""

    def __init__(self, file: str, key: str, reason: str) -> None:
        super().__init__(f"{file}: {reason}" if key == "-" else f"{file}: {key}: {reason}")
        self.file, self.key, self.reason = file, key, reason
