"""Refuses log patterns that can backtrack catastrophically (ReDoS): a static look at the parsed
pattern for the known shapes, then a timed run against strings built to make it backtrack.

Python's `re` cannot be interrupted mid-match, so the timed run grows its strings a few
characters at a time: an exponential pattern crosses the budget after a step that costs at most
a few times the budget, never a hang.
"""
from __future__ import annotations

import functools
import re
import time
from typing import Any

try:  # Python 3.11+: the parser lives in re._parser (sre_parse is a deprecated alias)
    from re import (
        _constants as sre_constants,  # type: ignore[attr-defined]
        _parser as sre_parse,  # type: ignore[attr-defined]
    )
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

C = sre_constants
UNBOUNDED = C.MAXREPEAT
BIG = 16  # a repeat allowing more than this many iterations counts as unbounded here
REPEATS = {C.MAX_REPEAT, C.MIN_REPEAT} | ({C.POSSESSIVE_REPEAT} if hasattr(C, "POSSESSIVE_REPEAT") else set())
PER_MATCH_S = 0.05   # one search of one adversarial string
TOTAL_S = 0.5        # all of them, for one pattern
# Small steps: exponential cost crosses the budget within a step or two. Not long strings: any
# `x+y` search is quadratic on a line with no y (each start rescans), which the line cap bounds.
SIZES = (8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 40, 48, 64, 256)
PROBE_CHARS = " a0Z_.-:/,;=\t\"'x!@#[](){}<>|\\"
ALPHABET = PROBE_CHARS + "".join(chr(c) for c in range(32, 127)) + "\u00e9\n"


class Unsafe(ValueError):
    """A pattern refused, with the reason in one line."""


def check(pattern: str, timed: bool = True) -> None:
    """Raise Unsafe (a ValueError) when `pattern` has a catastrophic-backtracking shape, or when
    (timed) a search of an adversarial string takes longer than the budget."""
    try:
        parsed = sre_parse.parse(pattern)
    except re.error as exc:
        raise Unsafe(f"not a regular expression: {exc}") from None
    why = _shape(list(parsed))
    if why:
        raise Unsafe(why)
    if timed:
        why = _timed(re.compile(pattern), parsed)
        if why:
            raise Unsafe(why)


# ---- static shapes ------------------------------------------------------------------------

def _is_big(max_: int) -> bool:
    return max_ == UNBOUNDED or max_ > BIG


def _shape(items: list) -> str:
    for op, av in items:
        if op in REPEATS:
            min_, max_, sub = av
            sub = list(sub)
            if _is_big(max_):
                why = _nested(sub) or _overlapping_branches(sub)
                if why:
                    return why
            why = _shape(sub)
        elif op == C.SUBPATTERN:
            why = _shape(list(av[-1]))
        elif op == C.BRANCH:
            why = next((w for w in (_shape(list(b)) for b in av[1]) if w), "")
        elif op in (C.ASSERT, C.ASSERT_NOT):
            why = _shape(list(av[1]))
        elif hasattr(C, "ATOMIC_GROUP") and op == C.ATOMIC_GROUP:
            why = ""  # an atomic group never backtracks into itself
        else:
            why = ""
        if why:
            return why
    return ""


def _nested(sub: list) -> str:
    """An unbounded repeat inside an unbounded repeat, unless every iteration must pass a
    character the inner repeat cannot take (`(?:\\.\\d+)*` is safe, `(\\w+\\s?)+` is not)."""
    inner = _inner_repeats(sub)
    if not inner:
        return ""
    anchors = [_charset(item) for item in _flat(sub) if _mandatory(item)]
    for chars in inner:
        if not any(a is not None and chars is not None and not (a & chars) for a in anchors):
            return ("nested quantifiers (a repeated group holding an unbounded repeat, e.g. (a+)+): "
                    "catastrophic backtracking on a line that almost matches")
    return ""


def _flat(sub: list) -> list:
    """A sequence with its groups opened: (?:\\.\\d+) is the items \\. and \\d+ in a row."""
    out: list = []
    for op, av in sub:
        if op == C.SUBPATTERN:
            out.extend(_flat(list(av[-1])))
        else:
            out.append((op, av))
    return out


def _inner_repeats(sub: list) -> list[set[str] | None]:
    found: list[set[str] | None] = []
    for op, av in sub:
        if op in REPEATS:
            if _is_big(av[1]):
                found.append(_seq_chars(list(av[2])))
            found.extend(_inner_repeats(list(av[2])))
        elif op == C.SUBPATTERN:
            found.extend(_inner_repeats(list(av[-1])))
        elif op == C.BRANCH:
            for b in av[1]:
                found.extend(_inner_repeats(list(b)))
    return found


def _overlapping_branches(sub: list) -> str:
    """(a|ab)+ or (\\w|\\d)+: branches that can start with the same character, repeated."""
    for op, av in sub:
        if op == C.SUBPATTERN:
            why = _overlapping_branches(list(av[-1]))
            if why:
                return why
        if op != C.BRANCH:
            continue
        firsts = [_first_chars(list(b)) for b in av[1]]
        for i, a in enumerate(firsts):
            for b in firsts[i + 1:]:
                if a is None or b is None or a & b:
                    return ("a repeated alternation whose branches can match the same text: "
                            "catastrophic backtracking on a line that almost matches")
    return ""


def _mandatory(item: tuple) -> bool:
    op, av = item
    if op in (C.LITERAL, C.NOT_LITERAL, C.IN, C.ANY):
        return True
    return op in REPEATS and av[0] >= 1 and _charset(item) is not None and not list(av[2])[1:]


def _charset(item: tuple) -> set[str] | None:
    """The characters (from a probe alphabet) one item can consume; None when it is not a
    single-character item (a group, a branch)."""
    op, av = item
    if op in REPEATS:
        sub = list(av[2])
        return _charset(sub[0]) if len(sub) == 1 else None
    if op not in (C.LITERAL, C.NOT_LITERAL, C.IN, C.ANY):
        return None
    rx = _compile_item(item)
    return {ch for ch in ALPHABET if rx.fullmatch(ch)}


def _seq_chars(sub: list) -> set[str] | None:
    """Every character a sequence's items can consume (None when unknown: be careful)."""
    out: set[str] = set()
    for item in sub:
        op, av = item
        if op == C.SUBPATTERN:
            chars = _seq_chars(list(av[-1]))
        elif op == C.BRANCH:
            parts = [_seq_chars(list(b)) for b in av[1]]
            chars = None if any(p is None for p in parts) else set().union(*parts)  # type: ignore[arg-type]
        elif op in REPEATS:
            chars = _seq_chars(list(av[2]))
        elif op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            chars = set()
        else:
            chars = _charset(item)
        if chars is None:
            return None
        out |= chars
    return out


def _first_chars(sub: list) -> set[str] | None:
    for item in sub:
        op, av = item
        if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            continue
        if op == C.SUBPATTERN:
            return _first_chars(list(av[-1]))
        if op in REPEATS:
            return _seq_chars(list(av[2]))  # may be skipped (min 0): a superset is fine here
        if op == C.BRANCH:
            parts = [_first_chars(list(b)) for b in av[1]]
            return None if any(p is None for p in parts) else set().union(*parts)  # type: ignore[arg-type]
        return _charset(item)
    return set()


def _compile_item(item: tuple) -> re.Pattern:
    return _compiled(_unparse([item]))


@functools.lru_cache(maxsize=1024)
def _compiled(text: str) -> re.Pattern:
    return re.compile(text, re.S)


def _unparse(sub: Any) -> str:
    """Enough of a parsed single-character item, back as pattern text."""
    out = []
    for op, av in sub:
        if op == C.LITERAL:
            out.append(re.escape(chr(av)))
        elif op == C.NOT_LITERAL:
            out.append(f"[^{re.escape(chr(av))}]")
        elif op == C.ANY:
            out.append(".")
        elif op == C.IN:
            out.append("[" + "".join(_unparse_in(av)) + "]")
    return "".join(out)


_CATEGORIES = {"CATEGORY_DIGIT": r"\d", "CATEGORY_NOT_DIGIT": r"\D", "CATEGORY_SPACE": r"\s",
               "CATEGORY_NOT_SPACE": r"\S", "CATEGORY_WORD": r"\w", "CATEGORY_NOT_WORD": r"\W"}


def _unparse_in(items: Any) -> list[str]:
    out = []
    for op, av in items:
        if op == C.NEGATE:
            out.insert(0, "^")
        elif op == C.LITERAL:
            out.append(re.escape(chr(av)))
        elif op == C.RANGE:
            out.append(f"{re.escape(chr(av[0]))}-{re.escape(chr(av[1]))}")
        elif op == C.CATEGORY:
            out.append(_CATEGORIES.get(str(av), r"\w"))
    return out or [r"\s\S"]


# ---- timed run ----------------------------------------------------------------------------

def _timed(rx: re.Pattern, parsed: Any) -> str:
    attacks = _attacks(list(parsed), "")
    attacks.append(("", "a", ""))
    spent = 0.0
    for prefix, pump, _ in attacks[:24]:
        if not pump:
            continue
        for n in SIZES:
            text = prefix + pump * n + "\x00!"
            if len(text) > 1 << 15:
                break
            start = time.perf_counter()
            rx.search(text)
            took = time.perf_counter() - start
            spent += took
            if took > PER_MATCH_S or spent > TOTAL_S:
                return (f"a search of a {len(text)}-character line built to make it backtrack took "
                        f"{took * 1000:.0f} ms (budget {PER_MATCH_S * 1000:.0f} ms): catastrophic "
                        f"backtracking")
    return ""


def _attacks(items: list, prefix: str) -> list[tuple[str, str, str]]:
    """(prefix, pump, '') for each repeat: what precedes it, and a string one iteration takes."""
    out: list[tuple[str, str, str]] = []
    for item in items:
        op, av = item
        if op in REPEATS:
            sub = list(av[2])
            out.append((prefix, _sample(sub, pump=True), ""))
            out.extend(_attacks(sub, prefix))
        elif op == C.SUBPATTERN:
            out.extend(_attacks(list(av[-1]), prefix))
        elif op == C.BRANCH:
            for b in av[1]:
                out.extend(_attacks(list(b), prefix))
        prefix += _sample([item])
    return out


def _sample(items: list, pump: bool = False) -> str:
    """A short string the items match (best effort); pump=True joins every branch."""
    out = []
    for item in items:
        op, av = item
        if op in REPEATS:
            out.append(_sample(list(av[2]), pump) * max(av[0], 1 if pump else 0))
        elif op == C.SUBPATTERN:
            out.append(_sample(list(av[-1]), pump))
        elif op == C.BRANCH:
            branches = [_sample(list(b), pump) for b in av[1]]
            out.append("".join(branches) if pump else branches[0])
        elif op in (C.LITERAL, C.NOT_LITERAL, C.IN, C.ANY):
            chars = _charset(item) or {"a"}
            out.append(min(chars, key=lambda ch: (PROBE_CHARS.find(ch) % 1000, ch)))
    return "".join(out)
