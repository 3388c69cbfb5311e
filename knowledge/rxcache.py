"""Compiled regular expressions kept between runs, for the patterns lazyre compiles.

`re.compile` parses a pattern and compiles it to the regex engine's program in pure Python: about
4 ms of a small `distdoctor logs` (53 patterns, some long alternations). The program is a list of
integers; kept in the start-up cache (knowledge/cache.py, JSON), a later run hands it back to the
engine (_sre.compile, ~5 us a pattern) instead. The cache is keyed on the interpreter's exact
version and the engine's MAGIC; a program is stored only once the pattern rebuilt from it equals
re.compile's (Pattern equality compares the programs), with a checksum over the pattern and the
program, and an entry whose checksum or program does not hold is compiled as usual. CPython 3.11+ only (re._parser, re._compiler); elsewhere this is re.compile. New programs
are written once, at exit, by a run that compiled a pattern the cache did not hold.
"""
from __future__ import annotations

import atexit
import re
import sys
from array import array
from typing import Any

from . import cache

try:
    import _sre
    from re import _compiler, _parser

    USABLE = sys.implementation.name == "cpython" and array("I").itemsize == _sre.CODESIZE
except ImportError:  # pragma: no cover - another interpreter, or Python 3.10's sre_compile
    USABLE = False

NAME = "regex"
MAX_ENTRIES = 1000  # the patterns of every command are ~150; more is another version's leftovers
# what the engine or a damaged entry may raise while a program is rebuilt
_REFUSED = (RuntimeError, TypeError, ValueError, OverflowError, AttributeError, IndexError, KeyError)

_known: dict[str, Any] | None = None  # the stored programs, read on the first compile
_added: dict[str, Any] = {}  # programs made by this run, written at exit
_key: str | None = None


def compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """re.compile(pattern, flags), rebuilt from the stored program when there is one."""
    if not USABLE or not isinstance(pattern, str) or flags & re.DEBUG:
        return re.compile(pattern, flags)
    name = f"{int(flags)}:{pattern}"
    entry = _programs().get(name)
    if entry is not None:
        try:
            if entry[4] == _check(name, *entry[:4]):
                return _build(pattern, *entry[:4])
        except _REFUSED:
            pass  # damaged: compiled below and stored again
    rx = re.compile(pattern, flags)
    _remember(name, pattern, int(flags), rx)
    return rx


def _programs() -> dict[str, Any]:
    global _known, _key
    if _known is None:
        _key = cache.digest(["regex", sys.version, str(_sre.MAGIC)])
        stored = cache.load(NAME, _key)
        _known = stored if isinstance(stored, dict) else {}
    return _known


def _check(name: str, flags: int, groups: int, groupindex: dict[str, int], code: str) -> str:
    """A checksum of an entry: a damaged file must not give a different (valid) program."""
    return cache.digest([name, f"{flags} {groups}", *(f"{g}={i}" for g, i in groupindex.items()), code])[:16]


def _build(pattern: str, flags: int, groups: int, groupindex: dict[str, int], code: str) -> re.Pattern[str]:
    """The pattern from its stored parts, as re._compiler.compile hands them to the engine."""
    indexgroup: list[str | None] = [None] * (groups + 1)
    for group, i in groupindex.items():
        indexgroup[i] = group
    program = array("I", bytes.fromhex(code)).tolist()
    return _sre.compile(pattern, flags, program, groups, dict(groupindex), tuple(indexgroup))


def _remember(name: str, pattern: str, flags: int, rx: re.Pattern[str]) -> None:
    """Keep rx's program for the next runs, if the pattern rebuilt from it is rx."""
    try:
        program = _compiler._code(_parser.parse(pattern, flags), flags)
        code = array("I", program).tobytes().hex()
        if _build(pattern, rx.flags, rx.groups, dict(rx.groupindex), code) != rx:
            return
    except (*_REFUSED, re.error):
        return  # not kept: the next run compiles it as usual
    if not _added:
        atexit.register(_save)
    parts = (rx.flags, rx.groups, dict(rx.groupindex), code)
    _added[name] = [*parts, _check(name, *parts)]


def _save() -> None:
    known = _programs()
    merged = {**(known if len(known) < MAX_ENTRIES else {}), **_added}
    cache.store(NAME, _key or "", merged)
