"""Turns a command's JSON result of unknown depth into a summary list and plain tables for reports."""
from __future__ import annotations

import json
from typing import Any

MAX_COLUMNS = 8
MAX_ROWS = 200


def cell(value: Any, limit: int = 240) -> str:
    """One table cell: scalars as text, short lists joined, anything else compact JSON, capped."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)) and all(not isinstance(v, (dict, list)) for v in value):
        text = ", ".join(str(v) for v in value)
    elif isinstance(value, (dict, list, tuple)):
        text = json.dumps(value, default=str, separators=(",", ":"))
    else:
        text = str(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _table(title: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    columns: list[str] = []
    for item in items:
        for key in item:
            if key not in columns and len(columns) < MAX_COLUMNS:
                columns.append(str(key))
    rows = [[cell(item.get(c)) for c in columns] for item in items[:MAX_ROWS]]
    return {"title": title, "columns": columns, "rows": rows, "more": max(0, len(items) - MAX_ROWS)}


def tabulate(data: Any) -> dict[str, Any]:
    """{"summary": [[name, value]...], "tables": [{"title", "columns", "rows", "more"}]}: scalars
    (and one level of nested dicts, as dotted names) go to the summary, lists of dicts to tables."""
    summary: list[list[str]] = []
    tables: list[dict[str, Any]] = []
    if not isinstance(data, dict):
        return {"summary": [["value", cell(data)]] if data is not None else [], "tables": []}
    for key, value in data.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            tables.append(_table(str(key), value))
        elif isinstance(value, dict):
            for sub, inner in value.items():
                summary.append([f"{key}.{sub}", cell(inner)])
            if not value:
                summary.append([str(key), "—"])
        else:
            summary.append([str(key), cell(value) if value is not None else "—"])
    return {"summary": summary, "tables": tables}


def flatten(group: str, facts: Any, depth: int = 3) -> list[dict[str, str]]:
    """(group, dotted name, value) rows from nested facts. A {"value", "source"} pair (how the
    switches probe records a variable) is one row, "value (from source)"."""
    rows: list[dict[str, str]] = []

    def visit(name: str, value: Any, level: int) -> None:
        if isinstance(value, dict) and "value" in value and set(value) <= {"value", "source"}:
            source = value.get("source")
            text = cell(value["value"]) + (f" (from {source})" if source and source != "env" else "")
            rows.append({"group": group, "name": name, "value": text})
        elif isinstance(value, dict) and value and level < depth:
            for key, inner in value.items():
                visit(f"{name}.{key}" if name else str(key), inner, level + 1)
        else:
            rows.append({"group": group, "name": name or "-", "value": cell(value)})

    visit("", facts, 0)
    return rows
