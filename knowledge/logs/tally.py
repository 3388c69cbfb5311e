"""The running tally of the log rules: per cause its score, reasons, evidence lines and basis."""
from __future__ import annotations

from collections import defaultdict

from .records import Hit

BASES = ("evidence", "facts", "prior")  # strongest first: failure lines, what the logs show, the symptom


class Scores:
    """Cause id -> score, reasons and evidence, filled by the rules below."""

    def __init__(self) -> None:
        self.score: dict[str, float] = defaultdict(float)
        self.reasons: dict[str, list[str]] = defaultdict(list)
        self.evidence: dict[str, list[Hit]] = defaultdict(list)
        self.best: dict[str, float] = defaultdict(float)  # strongest single signature (tie-break)
        # the weight of its strongest failure signature (signatures.toml: 3 strong, 4 decisive)
        self.decisive: dict[str, float] = {}
        self.basis: dict[str, str] = {}
        self.against: dict[str, list[str]] = defaultdict(list)
        # the structural rules (knowledge/data/rules.toml ids) that added to each cause, in order
        self.rules: dict[str, list[str]] = defaultdict(list)

    def add(self, cause: str, amount: float, reason: str, hits: list[Hit] | None = None,
            basis: str = "evidence", rule: str = "") -> None:
        """Add `amount` to `cause`; `rule` is the structural rule's id (rules.toml), "" for the
        signatures and the symptom's shift."""
        self.score[cause] += amount
        if rule and rule not in self.rules[cause]:
            self.rules[cause].append(rule)
        if BASES.index(basis) < BASES.index(self.basis.get(cause, "prior")) or cause not in self.basis:
            self.basis[cause] = basis
        if reason:
            self.reasons[cause].append(reason)
        if hits:
            # structural evidence goes first, in the order the rule gave it
            fresh: list[Hit] = []
            for h in hits:
                if h not in fresh:
                    fresh.append(h)
            self.evidence[cause] = fresh + [h for h in self.evidence[cause] if h not in fresh]
