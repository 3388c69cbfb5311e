"""The error every command and the app raise for bad input: one line on stderr, exit code 2."""
from __future__ import annotations

from distdoctor.knowledge.errors import InputError


class UsageError(InputError):
    """Bad input from the user: printed as one line, exit code 2."""
