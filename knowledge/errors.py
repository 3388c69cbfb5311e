"""The error a broken knowledge file raises: which file, which key, and why."""
from __future__ import annotations


class KnowledgeError(Exception):
    """A broken knowledge file: which file, which key, and why."""

    def __init__(self, file: str, key: str, reason: str) -> None:
        super().__init__(f"{file}: {reason}" if key == "-" else f"{file}: {key}: {reason}")
        self.file, self.key, self.reason = file, key, reason
