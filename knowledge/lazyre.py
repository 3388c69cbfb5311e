"""Regular expressions compiled on first use, not at import.

A module-level `re.compile` costs its compile on every start of the command line, whether or
not the run ever reaches the code that searches with it (about 1 ms for a long alternation;
the log extractors, the redactor and the failure signatures hold about 125 of them, of which
`distdoctor logs` on a small hang's logs uses 46). `lazy(pattern, flags)` takes the
place of `re.compile(pattern, flags)` at module level: the pattern is compiled by the first
search, match, sub or other call, and from then on the compiled pattern's own bound methods
are the object's attributes, so a hot loop pays no extra Python call. The compile itself is
knowledge/rxcache.py's: the engine's program kept from an earlier run when there is one.
"""
from __future__ import annotations

import re
from typing import Any, cast

_METHODS = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "scanner")


class _Lazy:
    """Stands in for a compiled pattern; compiles it on the first use of any of its methods or
    attributes (`pattern` is known without compiling)."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self._flags = flags

    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern (compiling it the first time)."""
        from . import rxcache  # on the first compile: a command that compiles none never reads it

        rx = rxcache.compile(self.pattern, self._flags)
        vars(self).update({name: getattr(rx, name) for name in _METHODS})
        vars(self).update(compiled=lambda: rx, flags=rx.flags, groups=rx.groups, groupindex=rx.groupindex)
        return rx

    def __getattr__(self, name: str) -> Any:
        # only reached for a name not yet set: a method or attribute of the compiled pattern
        if name.startswith("__") or name in ("_flags", "pattern"):
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __reduce__(self) -> tuple[Any, ...]:
        return _Lazy, (self.pattern, self._flags)

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r}, {self._flags!r})"


def lazy(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """`re.compile(pattern, flags)`, done on first use (typed as the pattern it stands for)."""
    return cast("re.Pattern[str]", _Lazy(pattern, flags))
