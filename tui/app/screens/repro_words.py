"""The run steps' words: a bisection plan line cut to its verdict, and an interpreter error in
the app's terms (the field's key, not the command line's flag)."""
from __future__ import annotations

import re

from ..lang import t

_FLAG = re.compile(r"^--python (\S+?)[:：]\s*")
_POINT = re.compile(r"\s*[(（][^()（）]*--python[^()（）]*[)）]")


_SWITCH = re.compile(r"^(.*?\b[A-Z][A-Z0-9]*_\w+=\S+.*?[)）])[.。]\s*\S.*$", re.S)


def short_switch(line: str) -> str:
    """A bisection plan line up to its verdict ("... (if only this passes: p2p-unsupported)"),
    without the prose after it."""
    match = _SWITCH.match(line)
    return match.group(1) if match else line


def app_words(error: str) -> str:
    """An interpreter error from the command line's words (`--python X: ...`, "point --python at
    ...") in the app's: the field has a key, the app has no flags."""
    match = _FLAG.match(error)
    if not match:
        return error
    why = _POINT.sub("", error[match.end():]).strip()
    return t("python {python}: {why}. Press i and give the failing job's python (its venv's bin/python).",
             python=match.group(1), why=why.rstrip("."))
