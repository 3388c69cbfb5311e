"""The snapshot document's schema as a Python dict, and a small validator for it (no dependencies)."""
from __future__ import annotations

import math
import re
from typing import Any

from .fields import FIELDS

SCHEMA_NAME = "distdoctor.snapshot"
SCHEMA_VERSION = 1
SCHEMA_ID = f"{SCHEMA_NAME}/{SCHEMA_VERSION}"
SCHEMA_RE = re.compile(r"^distdoctor\.snapshot/(\d+)$")

PROBE_NAMES = ("versions", "shm", "launch", "switches", "network", "topology")
STATUSES = ("ok", "warn", "fail", "unavailable", "error")

# The compared fields, in the order compare reports them (`switches` is added per name), which
# must be in every schema-1 snapshot, and which may differ: all declared in fields.toml.
SUMMARY_FIELDS = tuple(f.id for f in FIELDS)
REQUIRED_FIELDS = tuple(f.id for f in FIELDS if f.required)
MAY_DIFFER = tuple(f.id for f in FIELDS if f.may_differ)

_OPT_STR = {"type": ["string", "null"]}
_OPT_INT = {"type": ["integer", "null"]}

SNAPSHOT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["schema", "host", "time", "summary", "topology", "probes", "end"],
    "properties": {
        "schema": {"type": "string", "const": SCHEMA_ID},
        "host": {"type": "string", "min_length": 1},
        "time": {"type": "string", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$"},
        "distdoctor": {"type": "string"},
        "duration_s": {"type": "number"},
        "python": {"type": "string"},
        "summary": {
            "type": "object",
            "required": [*REQUIRED_FIELDS, "switches"],
            "properties": {
                # every field may be null (unknown); health.py's hardware field is the hardware
                # checks with a problem, "none", or null (not checked)
                **{f.id: _OPT_INT if f.type == "integer" else _OPT_STR for f in FIELDS},
                "switches": {"type": "object", "values": {"type": "string"}},
            },
        },
        "topology": {
            "type": "object",
            "required": ["status", "gpu_count", "p2p", "nvlink"],
            "properties": {
                "status": {"type": "string", "enum": list(STATUSES)},
                "reason": {"type": "string"},
                "source": {"type": ["string", "null"]},
                "gpu_count": _OPT_INT,
                "gpu_models": {"type": "array", "items": {"type": "string"}},
                # p2p and nvlink are the topology probe's own facts, carried as they are
                "p2p": {"type": "any"},
                "nvlink": {"type": "any"},
            },
        },
        "probes": {
            "type": "object",
            "required": list(PROBE_NAMES),
            "values": {
                "type": "object",
                "required": ["status", "facts"],
                "properties": {
                    "status": {"type": "string", "enum": list(STATUSES)},
                    "reason": {"type": "string"},
                    "duration_s": {"type": "number"},
                    "facts": {"type": "object"},
                },
            },
        },
        "findings": {"type": "array", "items": {"type": "object"}},
        "notes": {"type": "array", "items": {"type": "string"}},
        "end": {"type": "string", "const": SCHEMA_ID},
    },
}

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "number": (int, float),
    "integer": (int,), "boolean": (bool,), "null": (type(None),),
}


def _type_ok(value: Any, name: str) -> bool:
    if name == "any":
        return True
    # bool is an int in Python but not a number in JSON
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[name])


# Bounds on what a snapshot may hold: a summary is a dozen short strings and small integers.
MAX_DEPTH = 16          # containers inside containers
MAX_INT = (1 << 63) - 1  # larger integers are not counts or sizes of anything real
MAX_STR = 4096          # characters in one string
MAX_ITEMS = 4096        # members of one object or array


class OutOfRange:
    """A JSON number kept as its text because it is no usable value (too many digits, inf, NaN):
    the bounds check names it instead of Python failing on it later."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"{self.text[:20]}..." if len(self.text) > 20 else self.text


def _parse_int(text: str) -> Any:
    # checked before int(): a 5000-digit literal is a ValueError there, a 4000-digit one is slow
    return int(text) if len(text.lstrip("-")) <= 19 and abs(int(text)) <= MAX_INT else OutOfRange(text)


def _parse_float(text: str) -> Any:
    value = float(text)
    return value if math.isfinite(value) else OutOfRange(text)


# json.loads(..., **NUMBER_HOOKS): huge integers, inf and NaN become OutOfRange markers
NUMBER_HOOKS: dict[str, Any] = {"parse_int": _parse_int, "parse_float": _parse_float,
                                "parse_constant": OutOfRange}


def bounds_problem(doc: Any, path: str = "$", *, max_str: int = MAX_STR, max_items: int = MAX_ITEMS,
                   max_depth: int = MAX_DEPTH) -> str:
    """The first place where `doc` passes the bounds above, as "PATH: what" ('' when none).
    Iterative, so a deep document cannot exhaust the stack here."""
    todo: list[tuple[Any, str, int]] = [(doc, path, 0)]
    while todo:
        value, where, depth = todo.pop()
        if isinstance(value, OutOfRange):
            digits = len(value.text.lstrip("-"))
            return f"{where}: number out of range ({digits} characters: {value!r})"
        if isinstance(value, str) and len(value) > max_str:
            return f"{where}: string of {len(value)} characters (at most {max_str})"
        if isinstance(value, (dict, list)):
            if depth >= max_depth:
                return f"{where}: nested more than {max_depth} levels deep"
            if len(value) > max_items:
                return f"{where}: {len(value)} members (at most {max_items})"
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                label = f"{where}.{str(key)[:40]}" if isinstance(value, dict) else f"{where}[{key}]"
                todo.append((item, label, depth + 1))
    return ""


def validate(doc: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """Problems of `doc` against `schema` (type, required, properties, values, items, const,
    enum, pattern, min_length), each as "PATH: what is wrong"; empty when it conforms."""
    types = schema.get("type", "any")
    types = [types] if isinstance(types, str) else list(types)
    if not any(_type_ok(doc, t) for t in types):
        return [f"{path}: expected {' or '.join(types)}, got {_json_type(doc)}"]
    problems: list[str] = []
    if "const" in schema and doc != schema["const"]:
        problems.append(f"{path}: expected {schema['const']!r}, got {doc!r}")
    if "enum" in schema and doc not in schema["enum"]:
        problems.append(f"{path}: {doc!r} is not one of {', '.join(map(str, schema['enum']))}")
    if isinstance(doc, str):
        if "pattern" in schema and not re.search(schema["pattern"], doc):
            problems.append(f"{path}: {doc!r} does not match {schema['pattern']}")
        if len(doc) < schema.get("min_length", 0):
            problems.append(f"{path}: empty")
    if isinstance(doc, dict):
        for key in schema.get("required", ()):
            if key not in doc:
                problems.append(f"{path}: missing {key!r}")
        props = schema.get("properties", {})
        for key, value in doc.items():
            sub = props.get(key, schema.get("values"))
            if sub is not None:
                problems.extend(validate(value, sub, f"{path}.{key}"))
    if isinstance(doc, list) and "items" in schema:
        for i, item in enumerate(doc):
            problems.extend(validate(item, schema["items"], f"{path}[{i}]"))
    return problems


def validate_snapshot(doc: Any) -> list[str]:
    """Problems that keep `doc` from being a valid snapshot of this schema version."""
    return validate(doc, SNAPSHOT_SCHEMA)


def _json_type(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _type_ok(value, name):
            return name
    return type(value).__name__


def json_cut_short(text: str) -> bool:
    """True when `text` opens a JSON object or list and ends before closing it (a node killed
    mid-write, a full disk), wherever the cut falls: in a string, a number or between items."""
    if text[:1] not in "{[":
        return False
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return depth > 0 or in_string
