"""Judges probe facts with the knowledge base's checks and turns them into findings."""
from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .frozen import Frozen, frozen
from .i18n import t
from .model import Check, KnowledgeBase
from .units import human_size

_MISSING = object()


class ResultLike(Protocol):
    """What evaluate needs of a probes.base.ProbeResult (knowledge/ must not import probes/)."""

    @property
    def name(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def facts(self) -> Mapping[str, Any]: ...
    @property
    def reason(self) -> str: ...


@dataclass(frozen=True)
class Finding:
    """One judged fact: what was found, why it matters, which causes it supports, what to do."""

    probe: str
    check: str
    status: str
    title: str
    detail: str
    cause_ids: tuple[str, ...]
    fix: str

    def to_dict(self) -> dict[str, Any]:
        return {"probe": self.probe, "check": self.check, "status": self.status,
                "title": self.title, "detail": self.detail, "cause_ids": list(self.cause_ids),
                "fix": self.fix}


def lookup(facts: Any, path: str, default: Any = _MISSING) -> Any:
    """The fact at a dotted path ('torch.version'), or `default` (_MISSING unless given); list
    items by index ('gpus.0'). The one dotted lookup: checks and `fleet compare` both use it."""
    value: Any = facts
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, (list, tuple)) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return default
    return value


def _ordered(a: Any, b: Any, fn: Callable[[Any, Any], bool]) -> bool | None:
    try:
        return fn(a, b)
    except TypeError:
        return None


OPS: dict[str, Callable[[Any, Any], bool | None]] = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: _ordered(a, b, lambda x, y: x < y),
    "le": lambda a, b: _ordered(a, b, lambda x, y: x <= y),
    "gt": lambda a, b: _ordered(a, b, lambda x, y: x > y),
    "ge": lambda a, b: _ordered(a, b, lambda x, y: x >= y),
    "true": lambda a, _: bool(a),
    "false": lambda a, _: not a,
    "present": lambda a, _: a is not _MISSING and a is not None,
    "absent": lambda a, _: a is _MISSING or a is None,
    "nonempty": lambda a, _: _ordered(a, None, lambda x, y: len(x) > 0),
    "empty": lambda a, _: _ordered(a, None, lambda x, y: len(x) == 0),
    "in": lambda a, b: _ordered(a, b, lambda x, y: x in y),
    "not_in": lambda a, b: _ordered(a, b, lambda x, y: x not in y),
    "contains": lambda a, b: _ordered(a, b, lambda x, y: y in x),
    "matches": lambda a, b: _search(str(b), str(a)),
}


def _search(pattern: str, text: str) -> bool | None:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return None  # a broken overlay pattern cannot judge anything


# A check's value is a literal, or one of these tables, so that the comparison lives in the data
# and a probe only reports what it measured (a site overlay can then move a limit or a range):
#   value = { fact = "world_size" }                      another fact of the same probe
#   value = { min = 1, max = 65535 }                     a range, both ends included (in / not_in)
#   value = { min = 0, below = { fact = "world_size" } } a range whose upper end is excluded
#   value = [0, { min = 2, below = 8 }]                  in / not_in: any of these values or ranges
# A bound is a number, an array of numbers (a version as [major, minor, patch], which compares part
# by part) or a { fact = ... } table. A named fact that is absent leaves the check unjudged.
RANGE_KEYS = ("min", "max", "below")
_VALUE_LESS_OPS = ("true", "false", "present", "absent", "nonempty", "empty")


@frozen
class Range(Frozen):
    """Values from `low` up to `high` (`high` itself only when `inclusive`); an open end is None."""

    low: Any
    high: Any
    inclusive: bool

    def __contains__(self, value: Any) -> bool:
        try:
            return ((self.low is None or self.low <= value)
                    and (self.high is None or (value <= self.high if self.inclusive else value < self.high)))
        except TypeError:
            return False  # a value that does not order with the bounds (MASTER_PORT='x') is outside them

    def __str__(self) -> str:
        low = "" if self.low is None else self.low
        high = "" if self.high is None else self.high
        return f"{low}..{high}" if self.inclusive else f"{low}..<{high}"


@frozen
class AnyOf(Frozen):
    """A value `in` it equals one of its items or lies in one of its ranges."""

    items: tuple[Any, ...]

    def __contains__(self, value: Any) -> bool:
        return any(value in item if isinstance(item, Range) else value == item for item in self.items)

    def __str__(self) -> str:
        return ", ".join(str(item) for item in self.items)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _table_error(table: Mapping[str, Any], in_range: bool) -> str:
    if "fact" in table:
        extra = set(table) - {"fact"}
        if extra:
            return f"a {{ fact = ... }} table takes nothing else (not {', '.join(sorted(extra))})"
        fact = table["fact"]
        return "" if isinstance(fact, str) and fact else "fact must name a fact (a non-empty string)"
    if in_range:
        return "a range bound is a number, an array of numbers or a { fact = ... } table"
    unknown = set(table) - set(RANGE_KEYS)
    if unknown or not table:
        return (f"unknown key(s) {', '.join(sorted(unknown))}: " if unknown else "an empty table: ") + \
            "a table value is { fact = \"...\" } or a range { min, max | below }"
    if "max" in table and "below" in table:
        return "a range has max (included) or below (excluded), not both"
    for key in RANGE_KEYS:
        bound = table.get(key)
        if key not in table or _is_number(bound) or (isinstance(bound, list) and bound
                                                     and all(_is_number(b) for b in bound)):
            continue
        why = _table_error(bound, True) if isinstance(bound, Mapping) else \
            "a range bound is a number, an array of numbers or a { fact = ... } table"
        if why:
            return f"{key}: {why}"
    return ""


def value_error(op: str, value: Any) -> str:
    """Why `value` cannot be compared with `op` ('' when it can): the shapes above, a range or a
    list of ranges only with in / not_in, no table with an op that takes no value. For the
    loader to reject a broken check on load; evaluate skips one (never judges it)."""
    tables = [value] if isinstance(value, Mapping) else \
        [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []
    if not tables:
        return ""
    if op in _VALUE_LESS_OPS:
        return f"op {op!r} takes no value: a table there is a mistake"
    if op == "matches":  # a pattern is checked for backtracking on load: it must be written out
        return "op 'matches' takes a pattern string, not a table"
    for table in tables:
        why = _table_error(table, False)
        if why:
            return why
        if "fact" not in table and op not in ("in", "not_in"):
            return f"a range goes with op in or not_in, not {op!r}"
    if isinstance(value, list) and op not in ("in", "not_in"):
        return f"a list with tables goes with op in or not_in, not {op!r}"
    return ""


def operand(value: Any, facts: Mapping[str, Any]) -> Any:
    """What a check compares its fact with: `value`, with { fact = ... } tables replaced by those
    facts and range tables by a Range (lists holding tables become an AnyOf); _MISSING when a
    named fact is absent or None."""
    if isinstance(value, Mapping):
        if "fact" in value:
            found = lookup(facts, value["fact"])
            return _MISSING if found is None else found
        low = operand(value["min"], facts) if "min" in value else None
        high = operand(value.get("max", value.get("below")), facts)
        if low is _MISSING or high is _MISSING:
            return _MISSING
        return Range(low, high, "below" not in value)
    if isinstance(value, list) and any(isinstance(v, Mapping) for v in value):
        items = tuple(operand(v, facts) for v in value)
        return _MISSING if any(i is _MISSING for i in items) else AnyOf(items)
    return value


def spelled(value: Any) -> str:
    """A check's value as `knowledge show` prints it: {world_size} for another fact, 1..65535 for
    a range with its top, 0..<{world_size} for one without."""
    if isinstance(value, Mapping):
        if "fact" in value:
            return "{" + str(value["fact"]) + "}"
        low = spelled(value["min"]) if "min" in value else ""
        return f"{low}..{spelled(value['max'])}" if "max" in value else f"{low}..<{spelled(value.get('below'))}"
    if isinstance(value, list):
        return "[" + ", ".join(spelled(v) for v in value) + "]"
    return repr(value)


def holds(check: Check, facts: Mapping[str, Any]) -> bool | None:
    """Whether the check's condition holds; None when it cannot be judged (a fact absent or of the
    wrong type, a malformed value), in which case the check is skipped."""
    value = lookup(facts, check.fact)
    if check.op not in ("present", "absent") and (value is _MISSING or value is None):
        return None
    fn = OPS.get(check.op)
    if fn is None or value_error(check.op, check.value):
        return None
    other = operand(check.value, facts)
    return None if other is _MISSING else fn(value, other)


class _SoftFormatter(string.Formatter):
    """str.format over nested facts: '{driver.version}' walks dicts, a missing key stays visible
    as '<driver.version>' instead of raising, lists print comma-separated."""

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        value = lookup(kwargs, field_name)
        return (f"<{field_name}>" if value is _MISSING or value is None else value), field_name

    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec == "size" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return human_size(value)
        if isinstance(value, (list, tuple)):
            value = ", ".join(str(v) for v in value) or "none"
        try:
            return super().format_field(value, format_spec)
        except (ValueError, TypeError):
            return str(value)


_FORMATTER = _SoftFormatter()


def fill(template: str, facts: Mapping[str, Any]) -> str:
    """Fill a title/detail/fix template with facts, never raising (a malformed overlay template
    is shown as written)."""
    if not template:
        return ""
    try:
        return _FORMATTER.vformat(template, (), facts)
    except (ValueError, IndexError, KeyError, AttributeError):
        return template


def _with_threshold(facts: Mapping[str, Any], check: Check) -> Mapping[str, Any]:
    """The facts a check's texts are filled with: the probe's, plus {threshold} (what the check
    compared with: its value, the other fact it names, or its range as '1..65535', so a site
    overlay that moves a limit is quoted right; `{threshold:size}` prints bytes as 1.0 GiB). A fact
    of that name wins."""
    if "threshold" in facts:
        return facts
    other = operand(check.value, facts)
    return {**facts, "threshold": None if other is _MISSING else other}


def _unrunnable(result: ResultLike) -> Finding:
    reason = result.reason or result.status
    return Finding(result.name, f"{result.name}-{result.status}", result.status,
                   t("{name} probe {status}", name=result.name, status=t(result.status)), reason, (), "")


def evaluate(kb: KnowledgeBase, results: Mapping[str, ResultLike]) -> list[Finding]:
    """Apply kb.checks to each probe's facts, in probe order then check order. A probe that could
    not run gives one finding saying why; a passing check gives an "ok" finding."""
    by_probe: dict[str, list[Check]] = {}
    for check in kb.checks.values():
        by_probe.setdefault(check.probe, []).append(check)
    findings: list[Finding] = []
    for name, result in results.items():
        if result.status in ("unavailable", "error"):
            findings.append(_unrunnable(result))
            continue
        for check in by_probe.get(name, []):
            verdict = holds(check, result.facts)
            if verdict is None:
                continue
            if verdict and any(holds(kb.checks[o], result.facts) for o in check.unless if o in kb.checks):
                verdict = False  # moot: a check it yields to fired (its own finding says more)
            facts = _with_threshold(result.facts, check)
            if verdict:
                findings.append(Finding(name, check.id, check.status, fill(check.title, facts),
                                        fill(check.detail, facts), check.cause_ids,
                                        fill(check.fix, facts)))
            else:
                title = fill(check.ok_title, facts) if check.ok_title else f"{check.id}: not found"
                # no cause ids on a pass: consumers count cause_ids as support for a cause
                findings.append(Finding(name, check.id, "ok", title, "", (), ""))
    return findings
