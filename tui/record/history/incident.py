"""One incident as the store keeps it, built from a diagnosis (`logs --json`, the app's
conclusion, the lead's `diagnose()`), a bisection, or a line of an export."""
from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from distdoctor.knowledge.i18n import t

from .signature import signature

MAX_CAUSES = 5
MAX_TEXT = 500  # summary, first line and resolution are cut here: a row stays about 1 KB
EXPORT_FORMAT = "distdoctor-incident"


def new_uid(now: float | None = None) -> str:
    """An id that stays the same in every store the incident is exported to."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(now or time.time())) + "-" + os.urandom(6).hex()


@dataclass
class Incident:
    """One concluded diagnosis as the incident store keeps it."""

    time: float
    uid: str = ""
    session: str | None = None
    job: str | None = None
    source: str | None = None  # what concluded it: logs, conclusion, bisect, repro, import
    hosts: list[str] = field(default_factory=list)
    ranks: list[str] = field(default_factory=list)
    culprit_ranks: list[str] = field(default_factory=list)
    culprit_host: str | None = None
    role: str | None = None
    outcome: str | None = None
    causes: list[dict[str, Any]] = field(default_factory=list)  # [{"id", "confidence"}]
    confidence: float | None = None
    summary: str | None = None
    first_line: str | None = None
    signature: str | None = None
    signature_text: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    fix_switch: str | None = None
    resolution: str | None = None
    resolved_at: float | None = None
    id: int | None = None

    @property
    def cause_ids(self) -> list[str]:
        return [str(c.get("id")) for c in self.causes if c.get("id")]

    def redacted(self) -> Incident:
        """A copy with every text field scrubbed the way reports are (redact.py)."""
        # imported by a write only: a lookup (`logs` recalling past incidents) does not pay ~1.4 ms for it
        from ..redact import redact, redact_text

        out = Incident(**asdict(self))
        for name in ("summary", "first_line", "signature_text", "resolution", "job", "fix_switch"):
            value = getattr(out, name)
            if isinstance(value, str):
                setattr(out, name, redact_text(value)[:MAX_TEXT])
        out.versions = redact(out.versions)
        return out

    def to_json(self) -> dict[str, Any]:
        """`history --json`'s shape (and more): the culprit as one object, the time as ISO 8601."""
        return {"id": self.id, "uid": self.uid, "time": iso(self.time), "session": self.session,
                "job": self.job, "source": self.source, "hosts": self.hosts, "ranks": self.ranks,
                "culprit": {"ranks": self.culprit_ranks, "host": self.culprit_host, "role": self.role},
                "outcome": self.outcome, "causes": self.causes, "confidence": self.confidence,
                "signature": self.signature, "signature_text": self.signature_text,
                "summary": self.summary, "first_line": self.first_line, "versions": self.versions,
                "fix_switch": self.fix_switch, "resolution": self.resolution,
                "resolved_at": iso(self.resolved_at) if self.resolved_at else None}

    def to_export(self) -> dict[str, Any]:
        """One line of `history export`: every field, times as epoch seconds, no local id."""
        data = asdict(self)
        data.pop("id")
        return {"format": EXPORT_FORMAT, "v": 1, **data}

    @classmethod
    def from_export(cls, data: Mapping[str, Any]) -> Incident:
        """The inverse of to_export; ValueError for a line that is not an incident."""
        if data.get("format") != EXPORT_FORMAT:
            raise ValueError(t("not a distdoctor incident (no \"format\": \"distdoctor-incident\")"))
        known = {f.name for f in fields(cls)} - {"id"}
        values = {k: v for k, v in data.items() if k in known}
        if not isinstance(values.get("time"), (int, float)) or not values.get("uid"):
            raise ValueError(t("an incident needs a numeric \"time\" and a \"uid\""))
        inc = cls(**values)
        inc.hosts, inc.ranks, inc.culprit_ranks = (_strs(inc.hosts), _strs(inc.ranks), _strs(inc.culprit_ranks))
        inc.causes = [c for c in inc.causes if isinstance(c, dict)] if isinstance(inc.causes, list) else []
        inc.versions = dict(inc.versions) if isinstance(inc.versions, dict) else {}
        return inc


def iso(stamp: float | None) -> str | None:
    if stamp is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def _strs(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


# --- from a diagnosis --------------------------------------------------------------------------

def from_diagnosis(diagnosis: Mapping[str, Any], *, session_id: str | None = None,
                   hosts: Iterable[str] | Mapping[str, str] | None = None,
                   versions: Mapping[str, Any] | None = None, job: str | None = None,
                   source: str = "diagnosis", culprit_host: str | None = None,
                   first_line: str | None = None, now: float | None = None) -> Incident:
    """An incident from a diagnosis dict: `distdoctor logs --json` (verdict, causes,
    first_failure, ranks, timeline, facts), the app's conclusion ({causes, culprit}) or a
    Diagnosis dict ({culprit, confidence, causes, summary, ranks}). `hosts` is a list of the
    job's hosts or a mapping rank -> host; hosts the logs name are added. `first_line` is the
    first failure line when the dict has no `first_failure` (a Diagnosis). A confidence in words
    ("likely") is kept as the outcome; the stored confidence is the top cause's share."""
    verdict = diagnosis.get("verdict") if isinstance(diagnosis.get("verdict"), Mapping) else {}
    culprit = verdict.get("culprit") or diagnosis.get("culprit") or {}
    culprit = culprit if isinstance(culprit, Mapping) else {}
    rank_hosts = _rank_hosts(diagnosis, hosts)
    ranks = sorted({str(r) for r in (diagnosis.get("ranks") or diagnosis.get("timeline") or {})} | set(rank_hosts),
                   key=lambda r: (len(r), r))
    culprit_ranks = _strs(culprit.get("ranks") or ([culprit["rank"]] if culprit.get("rank") is not None else []))
    host = culprit_host or culprit.get("host")
    if not host:
        named = {rank_hosts[r] for r in culprit_ranks if r in rank_hosts}
        host = named.pop() if len(named) == 1 else None
    all_hosts = sorted(set(rank_hosts.values()) | (set(hosts) if isinstance(hosts, (list, tuple, set)) else set())
                       | ({host} if host else set()))
    causes = _causes(diagnosis, verdict)
    first = diagnosis.get("first_failure") if isinstance(diagnosis.get("first_failure"), Mapping) else {}
    line = first_line or str(first.get("text") or "") or None
    sig, sig_text = signature(line, causes[0]["id"] if causes else None, all_hosts)
    confidence = diagnosis.get("confidence")
    said = confidence if isinstance(confidence, str) else None  # "confirmed", "likely", ...
    if not isinstance(confidence, (int, float)) or isinstance(confidence, bool):
        confidence = causes[0]["confidence"] if causes else None
    failed = verdict.get("failed", diagnosis.get("failed"))
    summary = verdict.get("summary") or diagnosis.get("summary") or culprit.get("summary") or culprit.get("why")
    return Incident(
        time=now or time.time(), uid=new_uid(now), session=session_id, job=job, source=source,
        hosts=all_hosts, ranks=ranks, culprit_ranks=culprit_ranks, culprit_host=host,
        role=culprit.get("role"), outcome=diagnosis.get("outcome") or said or
        ("failed" if failed else "no failure" if failed is False else None),
        causes=causes, confidence=round(float(confidence), 3) if confidence is not None else None,
        summary=str(summary)[:MAX_TEXT] if summary else None, first_line=line[:MAX_TEXT] if line else None,
        signature=sig or None, signature_text=sig_text or None,
        versions={**_versions(diagnosis), **{k: str(v) for k, v in (versions or {}).items() if v}})


def _rank_hosts(diagnosis: Mapping[str, Any], hosts: Any) -> dict[str, str]:
    """rank -> host: a rank whose lines name exactly one host (the logs' timeline, a Diagnosis's
    ranks), then the caller's mapping over them."""
    out: dict[str, str] = {}
    for table in (diagnosis.get("ranks"), diagnosis.get("timeline")):
        for rank, line in (table.items() if isinstance(table, Mapping) else ()):
            named = line.get("hosts") or ([line["host"]] if line.get("host") else None) \
                if isinstance(line, Mapping) else None
            if isinstance(named, list) and len(set(named)) == 1:
                out[str(rank)] = str(named[0])
    if isinstance(hosts, Mapping):
        out.update({str(r): str(h) for r, h in hosts.items() if h})
    return out


def _causes(diagnosis: Mapping[str, Any], verdict: Mapping[str, Any]) -> list[dict[str, Any]]:
    """[{"id", "confidence"}] best first: the causes the verdict names when it names some (with
    the scores of the full list), else the list itself; a score becomes its share of the total."""
    listed = [c for c in diagnosis.get("causes") or [] if isinstance(c, Mapping) and c.get("id")]
    total = sum(max(float(c.get("score") or 0), 0.0) for c in listed)  # shares of every cause listed
    named = [str(c.get("id") if isinstance(c, Mapping) else c) for c in verdict.get("causes") or []]
    if named:
        by_id = {str(c["id"]): c for c in listed}
        listed = [by_id.get(i, {"id": i}) for i in named]
    scores = [float(c.get("score") or 0) for c in listed]
    out = []
    for cause, score in zip(listed[:MAX_CAUSES], scores):
        conf = cause.get("confidence")
        if not isinstance(conf, (int, float)) or isinstance(conf, bool):
            conf = score / total if total else None
        out.append({"id": str(cause["id"]), "confidence": round(float(conf), 3) if conf is not None else None})
    return out


def _versions(diagnosis: Mapping[str, Any]) -> dict[str, str]:
    """The versions the logs show (facts.values: {"nccl_version": {"2.21.5": "0,1"}})."""
    facts = diagnosis.get("facts") if isinstance(diagnosis.get("facts"), Mapping) else {}
    values = facts.get("values") if isinstance(facts.get("values"), Mapping) else {}
    out = {}
    for name, seen in values.items():
        if name.endswith("_version") and isinstance(seen, Mapping) and seen:
            out[name[: -len("_version")]] = ", ".join(sorted(map(str, seen)))
    return out
