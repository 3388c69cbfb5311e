"""knowledge/lazyre.py: a pattern compiled on first use behaves as the compiled pattern, and every
lazy pattern of the modules that use it is a valid regular expression (an error in one would
otherwise show only when a run first reaches it)."""
from __future__ import annotations

import importlib
import pickle
import re

import pytest

from distdoctor.knowledge.lazyre import _Lazy, lazy

USERS = ("distdoctor.knowledge.logs.extract", "distdoctor.knowledge.logs.timeline",
         "distdoctor.knowledge.logs.peers", "distdoctor.knowledge.logs.tocollect", "distdoctor.tui.record.redact",
         "distdoctor.tui.record.history.signature")


def test_not_compiled_until_used_then_the_compiled_patterns_methods() -> None:
    rx = lazy(r"rank (?P<r>\d+)", re.I)
    assert "search" not in vars(rx) and rx.pattern == r"rank (?P<r>\d+)"
    real = re.compile(r"rank (?P<r>\d+)", re.I)
    text = "RANK 3 and rank 12"
    assert rx.search(text).group("r") == real.search(text).group("r") == "3"
    assert "search" in vars(rx)  # from now on the compiled pattern's own bound method
    assert rx.match("x") is None and rx.fullmatch("rank 4").group("r") == "4"
    assert [m.group("r") for m in rx.finditer(text)] == ["3", "12"]
    assert rx.findall(text) == real.findall(text)
    assert rx.sub("<r>", text) == real.sub("<r>", text) and rx.subn("<r>", text) == real.subn("<r>", text)
    assert rx.split(text) == real.split(text)
    assert (rx.flags, rx.groups, rx.groupindex) == (real.flags, real.groups, real.groupindex)
    assert rx.compiled() is rx.compiled()


def test_first_use_through_any_attribute_and_pickling() -> None:
    rx = lazy(r"(a)(b)")
    assert rx.groups == 2  # an attribute compiles too
    copy = pickle.loads(pickle.dumps(lazy(r"x+", re.S)))
    assert copy.pattern == r"x+" and copy.flags == re.compile(r"x+", re.S).flags
    with pytest.raises(AttributeError):
        rx.not_a_pattern_attribute  # noqa: B018


def test_a_bad_pattern_fails_on_first_use() -> None:
    rx = lazy(r"(unclosed")
    with pytest.raises(re.error):
        rx.search("x")


def _lazies(value: object, seen: set[int]) -> list[_Lazy]:
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, _Lazy):
        return [value]
    if isinstance(value, (tuple, list)):
        return [rx for item in value for rx in _lazies(item, seen)]
    if isinstance(value, dict):
        return [rx for item in value.values() for rx in _lazies(item, seen)]
    return []


@pytest.mark.parametrize("name", USERS)
def test_every_lazy_pattern_of_a_module_compiles(name: str) -> None:
    found = _lazies(vars(importlib.import_module(name)), set())
    assert found, f"{name} holds no lazy pattern (update USERS)"
    for rx in found:
        assert isinstance(rx.compiled(), re.Pattern), rx.pattern
