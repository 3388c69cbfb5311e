"""The result of a log analysis: ranked causes with evidence, first failure, ranks and facts."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..frozen import Frozen, frozen
from ..i18n import t as tr


@frozen
class Evidence(Frozen):
    """One log line that supports a cause."""

    file: str
    line: int
    text: str
    rank: str | None = None
    signature: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"file": self.file, "line": self.line, "text": self.text}
        if self.rank is not None:
            d["rank"] = self.rank
        if self.signature:
            d["signature"] = self.signature
        return d


@dataclass
class CauseScore:
    """A candidate cause: its id (GUIDE.md section 2, or "other"), score and evidence."""

    id: str
    score: float
    evidence: list[Evidence] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    # only context lines point here (a launcher banner, a checkpoint load, "training finished"):
    # a lead worth a look, not a failure the logs show
    lead: bool = False
    # evidence: lines that show the failure; facts: what the logs show about the set-up (versions,
    # interfaces, launchers); prior: only the symptom points here
    basis: str = "evidence"
    against: list[str] = field(default_factory=list)
    # the weight of its strongest failure signature (0: structural rules only); signatures.toml's
    # scale: 1 a weak hint, 2 moderate, 3 strong, 4 decisive on its own
    weight: float = 0.0
    # the structural rules that scored it (knowledge/data/rules.toml ids; `knowledge show DL101`)
    rules: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "score": round(self.score, 2), "basis": self.basis,
                "evidence": [e.to_dict() for e in self.evidence], "reasons": list(self.reasons),
                "against": list(self.against), "lead": self.lead, "weight": self.weight,
                "rules": list(self.rules)}


@dataclass
class LogReport:
    """What `distdoctor logs` found; to_dict() is its --json output."""

    causes: list[CauseScore]
    first_failure: Evidence | None
    ranks: dict[str, dict[str, Any]]
    facts: dict[str, Any]
    files_read: int
    bytes_read: int
    skipped: list[dict[str, str]]
    notes: list[str] = field(default_factory=list)
    timeline: dict[str, dict[str, Any]] = field(default_factory=dict)
    culprit: dict[str, Any] | None = None
    summary: str = ""
    symptom: str | None = None  # the symptom given, made precise by the logs (score.refine)
    culprit_rule: str = ""  # the rules.toml id of the culprit rule that named it ("" when none)
    collect: list[str] = field(default_factory=list)  # what these logs say to collect next
    stage: str | None = None  # where the logs stop (score.stage): init, first-step, mid-training, save-eval

    @property
    def top(self) -> CauseScore | None:
        return self.causes[0] if self.causes else None

    def nothing_readable(self) -> str:
        """Why there is nothing to diagnose ("" when some file was read): the first skips."""
        if self.files_read:
            return ""
        why = "; ".join(f"{s['path']}: {s['reason']}" for s in self.skipped[:5])
        return tr("nothing readable in the given paths ({why})", why=why or tr("no input"))

    @property
    def failed(self) -> bool:
        """Whether the logs show a failure: a first failure line, or a cause resting on more than
        context lines. A healthy torchrun log has a launcher banner and no failure. A traceback
        no rank could be given to is a failure too: a process died, whichever rank it was."""
        return any(c.basis == "evidence" for c in self.causes) or self.culprit is not None and \
            self.culprit["role"] in ("crashed", "stuck", "slow")

    def verdict(self) -> dict[str, Any]:
        """The culprit, the story and the causes in order, each with its basis."""
        return {"culprit": self.culprit, "summary": self.summary, "failed": self.failed,
                "causes": [{"id": c.id, "basis": c.basis} for c in self.causes],
                "culprit_rule": self.culprit_rule}

    def to_dict(self) -> dict[str, Any]:
        ff = None
        if self.first_failure is not None:
            e = self.first_failure
            ff = {"rank": e.rank, "file": e.file, "line": e.line, "text": e.text}
        return {
            "verdict": self.verdict(),
            "causes": [c.to_dict() for c in self.causes],
            "first_failure": ff,
            "ranks": self.ranks,
            "facts": self.facts,
            "files_read": self.files_read,
            "bytes_read": self.bytes_read,
            "skipped": self.skipped,
            "notes": self.notes,
            "timeline": self.timeline,
            "symptom": self.symptom,
            "collect": list(self.collect),
            "stage": self.stage,
        }
