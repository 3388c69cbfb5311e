"""Judges probe facts with the knowledge base's checks and turns them into findings."""
from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

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


def holds(check: Check, facts: Mapping[str, Any]) -> bool | None:
    """Whether the check's condition holds; None when it cannot be judged (fact absent or of the
    wrong type), in which case the check is skipped."""
    value = lookup(facts, check.fact)
    if check.op not in ("present", "absent") and (value is _MISSING or value is None):
        return None
    fn = OPS.get(check.op)
    return None if fn is None else fn(value, check.value)


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
    """The facts a check's texts are filled with: the probe's, plus {threshold} (the check's own
    value, so a site overlay that moves a limit is quoted right; `{threshold:size}` prints bytes
    as 1.0 GiB). A fact of that name wins."""
    return facts if "threshold" in facts else {**facts, "threshold": check.value}


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
