"""The lint rule table (rules.toml, shipped as package data) and the Finding every rule returns."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from distdoctor.knowledge import tomlload


@dataclass(frozen=True)
class Rule:
    """One rule: a stable id (never reused), the GUIDE cause it points at, why, and the fix."""

    id: str
    name: str
    cause: str
    message: str
    fix: str


@dataclass(frozen=True)
class Finding:
    """One place in one file where a rule fires."""

    file: str
    line: int
    col: int
    rule: str
    cause_id: str
    message: str
    fix: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "col": self.col, "rule": self.rule,
                "cause_id": self.cause_id, "message": self.message, "fix": self.fix}


@lru_cache(maxsize=1)
def rules() -> dict[str, Rule]:
    """Every rule by id, loaded once from rules.toml."""
    text = resources.files("distdoctor.probes.lint").joinpath("rules.toml").read_text(encoding="utf-8")
    table: dict[str, Rule] = {}
    for entry in tomlload.loads(text)["rule"]:
        rule = Rule(entry["id"], entry["name"], entry["cause"], entry["message"].strip(),
                    entry["fix"].strip("\n"))
        if rule.id in table:
            raise ValueError(f"rules.toml: rule id {rule.id} appears twice")
        table[rule.id] = rule
    return table


def finding(path: str, node: Any, rule_id: str, name: str) -> Finding:
    """A Finding for `node`, the rule's message filled with `name` (the call or variable at fault)."""
    rule = rules()[rule_id]
    return Finding(path, getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1, rule.id, rule.cause,
                   rule.message.replace("{name}", name), rule.fix)
