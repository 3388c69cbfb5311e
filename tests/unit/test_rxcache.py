"""knowledge/rxcache.py: a pattern rebuilt from the program an earlier run kept is the pattern
re.compile makes (same program, flags and groups, same matches), and anything wrong with the
stored program costs only the compile it would have saved."""
from __future__ import annotations

import json
import re

import pytest

from distdoctor.knowledge import cache, rxcache

pytestmark = pytest.mark.skipif(not rxcache.USABLE, reason="no CPython 3.11+ regex internals here")

PATTERNS = [(r"\[rank(?P<rank>\d+)\]:\[(?P<lvl>[IWEF])\d{4}", 0), (r"watchdog.*?(timed? ?out)|(x)?y", re.I),
            (r"^\s*(?:\[(?:default|rank)\d+\]:\s*)+", re.M | re.S), (r"caf\u00e9|\bna\u00efve\b", 0)]


def _new_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a new process starts with: nothing read, nothing added."""
    monkeypatch.setattr(rxcache, "_known", None)
    monkeypatch.setattr(rxcache, "_added", {})


def _stored() -> dict:
    return json.loads(cache.path_for(rxcache.NAME).read_text())["value"]


def test_a_later_run_rebuilds_the_same_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    _new_run(monkeypatch)
    first = [rxcache.compile(p, f) for p, f in PATTERNS]
    rxcache._save()
    assert len(_stored()) == len(PATTERNS)
    _new_run(monkeypatch)
    monkeypatch.setattr(re, "compile", lambda *a: pytest.fail("compiled despite the stored program"))
    again = [rxcache.compile(p, f) for p, f in PATTERNS]
    monkeypatch.undo()
    text = "[rank3]:[E1129 x] Watchdog caught collective operation timeout; café y"
    for (pattern, flags), a, b in zip(PATTERNS, first, again):
        real = re.compile(pattern, flags)
        assert a == b == real  # Pattern equality compares the compiled programs
        assert (b.flags, b.groups, b.groupindex) == (real.flags, real.groups, real.groupindex)
        assert [m.span() for m in b.finditer(text)] == [m.span() for m in real.finditer(text)]
        assert [m.groups() for m in b.finditer(text)] == [m.groups() for m in real.finditer(text)]


def test_a_damaged_program_is_compiled_again_and_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    _new_run(monkeypatch)
    pattern, flags = PATTERNS[0]
    rxcache.compile(pattern, flags)
    rxcache._save()
    doc = json.loads(cache.path_for(rxcache.NAME).read_text())
    name = f"{int(flags)}:{pattern}"
    good = doc["value"][name]
    for bad in (good[:3] + ["00" * 40], good[:3] + ["zz"], [good[0], 99, good[2], good[3]], "junk", None):
        doc["value"][name] = bad
        cache.path_for(rxcache.NAME).write_text(json.dumps(doc))
        _new_run(monkeypatch)
        assert rxcache.compile(pattern, flags) == re.compile(pattern, flags)
        rxcache._save()
        assert _stored()[name] == good


def test_another_interpreter_s_file_is_a_miss(monkeypatch: pytest.MonkeyPatch) -> None:
    pattern, flags = PATTERNS[1]
    name = f"{int(flags)}:{pattern}"
    cache.store(rxcache.NAME, "another python", {name: ["not", "a", "program"]})
    _new_run(monkeypatch)
    assert rxcache.compile(pattern, flags) == re.compile(pattern, flags)
    assert rxcache._added[name] != ["not", "a", "program"]


def test_debug_patterns_and_bytes_are_left_to_re(monkeypatch: pytest.MonkeyPatch) -> None:
    _new_run(monkeypatch)
    assert rxcache.compile(rb"a+b", 0) == re.compile(rb"a+b")  # type: ignore[arg-type]
    assert rxcache._added == {}
