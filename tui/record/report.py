"""Builds the incident report (a JSON-able dict) from a session record; renderers live alongside."""
from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from distdoctor.knowledge.i18n import t

from . import report_verdict
from .findings import findings_of
from .redact import redact, redact_text, walk
from .report_causes import annotate, split
from .report_conclusion import conclude, switches_to_remove
from .report_html import render_html
from .report_md import render_markdown
from .report_runs import bisect_section, log_tail, repro_section
from .report_tables import cell as _cell, flatten, tabulate

__all__ = ["build_report", "export_report", "render_markdown", "render_html", "render_json",
           "RENDERERS"]

SCHEMA = 1
# Which step of the method each event kind belongs to (kb.steps ids).
STEP_OF = {"classify": "classify", "answer": "classify", "logs": "logs", "check": "environment",
           "topo": "environment", "fleet": "environment", "repro": "repro", "bisect": "bisect",
           "conclusion": "conclusion"}


def render_json(report: Mapping[str, Any]) -> str:
    return json.dumps(report, indent=2, default=str) + "\n"


RENDERERS = {"md": render_markdown, "html": render_html, "json": render_json}


def _iso(stamp: Any) -> str:
    try:
        return datetime.fromtimestamp(float(stamp)).astimezone().isoformat(timespec="seconds")
    except (TypeError, ValueError, OverflowError, OSError):
        return ""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("distdoctor")
    except PackageNotFoundError:
        return "unknown"


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def latest(record: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    """The data of the newest event of `kind`, or None."""
    for event in reversed(_l(record.get("events"))):
        if isinstance(event, dict) and event.get("kind") == kind and isinstance(event.get("data"), dict):
            return event["data"]
    return None


def _symptom(record: Mapping[str, Any], kb: Any) -> dict[str, Any] | None:
    data = latest(record, "classify") or {}
    field = record.get("symptom")
    if isinstance(field, dict):
        data = {**field, **data}
    elif isinstance(field, str) and field and not data.get("symptom"):
        data = {**data, "symptom": field}
    if not data:
        return None
    kind, sub = str(data.get("symptom") or data.get("kind") or ""), str(data.get("sub") or "")
    symptoms = getattr(kb, "symptoms", {}) or {}
    title = getattr(symptoms.get(sub), "title", "") or sub
    suspects = []
    for item in _l(data.get("suspects")):
        cause_id = item.get("id") if isinstance(item, dict) else item
        cause = getattr(kb, "causes", {}).get(cause_id)
        suspects.append({"id": str(cause_id), "title": getattr(cause, "title", ""),
                         "why": str(item.get("why", "")) if isinstance(item, dict) else ""})
    return {"kind": kind, "sub": sub, "title": title,
            "text": str(data.get("text") or data.get("line") or ""), "suspects": suspects}


def _step_summary(kind: str, data: Any) -> str:
    d = _d(data)
    if kind == "classify":
        return ": ".join(x for x in (str(d.get("symptom") or ""), str(d.get("sub") or "")) if x) \
            or t("classified")
    if kind == "answer":
        return f"{d.get('question', '?')} -> {d.get('answer', '?')}"
    if kind == "logs":
        causes = [c for c in _l(d.get("causes")) if isinstance(c, dict)]
        top = t("; top cause {id} (basis {basis})", id=causes[0].get("id"),
                basis=t(str(causes[0].get("basis") or "evidence"))) if causes else t("; no known cause matched")
        return t("{n} file(s) read", n=d.get("files_read", "?")) + top
    if kind == "check":
        findings = findings_of(d)
        counts = {s: sum(1 for f in findings if f.status == s) for s in ("fail", "warn")}
        return t("{n} finding(s): {fail} fail, {warn} warn", n=len(findings), fail=counts["fail"], warn=counts["warn"])
    if kind == "topo":
        return t("P2P {p2p}, NVLink {nvlink}, {n} GPU(s), source {source}", p2p=d.get("p2p", "unknown"),
                 nvlink=d.get("nvlink"), n=len(_l(d.get("gpus"))), source=d.get("source", "?"))
    if kind == "repro":
        detail = d.get("first_error") or d.get("stuck_at") or ""
        return t("outcome {outcome} in {seconds} s", outcome=d.get("outcome", "?"), seconds=d.get("duration_s", "?")) + \
            (f": {str(detail)[:160]}" if detail else "")
    if kind == "bisect":
        verdict, runs = d.get("verdict"), len(_l(d.get("runs")))
        if isinstance(verdict, dict):
            return t("{n} switch run(s); passes with {switch} -> {cause}", n=runs,
                     switch=verdict.get("env") or verdict.get("switch"), cause=verdict.get("cause"))
        if d.get("baseline_passed"):
            return t("the baseline passed: nothing to bisect on this node")
        return t("{n} switch run(s); no single switch turned the failure into a pass", n=runs)
    if kind == "fleet":
        return t("{n} node(s); {k} outlier field(s)", n=d.get("nodes", "?"), k=len(_l(d.get("outliers"))))
    if kind == "conclusion":
        causes = [c for c in _l(d.get("causes")) if isinstance(c, dict)]
        return t("top cause {id}", id=causes[0].get("id")) if causes else t("no cause concluded")
    return ", ".join(f"{k}={v}" for k, v in list(d.items())[:4] if not isinstance(v, (dict, list)))


def _steps(record: Mapping[str, Any], kb: Any) -> list[dict[str, Any]]:
    out = []
    for n, event in enumerate(e for e in _l(record.get("events")) if isinstance(e, dict)):
        kind = str(event.get("kind", "?"))
        step = getattr(kb, "steps", {}).get(STEP_OF.get(kind, ""))
        out.append({"n": n + 1, "kind": kind, "step": getattr(step, "title", "") or kind,
                    "time": _iso(event.get("time")), "summary": _step_summary(kind, event.get("data"))})
    return out


def _findings(check: dict[str, Any] | None) -> list[dict[str, Any]]:
    keep = ("status", "title", "detail", "fix", "cause_ids", "probe", "check")
    rows = [{k: f.to_dict()[k] for k in keep} for f in findings_of(check)]
    order = {"fail": 0, "error": 1, "warn": 2, "unavailable": 3, "ok": 4}
    return sorted(rows, key=lambda f: order.get(str(f.get("status")), 5))


def _evidence(logs: dict[str, Any] | None) -> list[dict[str, Any]]:
    rows = []
    for cause in _l(_d(logs).get("causes")):
        for ev in _l(_d(cause).get("evidence")):
            if isinstance(ev, dict):
                rows.append({"cause": cause.get("id"), "file": ev.get("file"), "line": ev.get("line"),
                             "text": str(ev.get("text", ""))})
    return rows


def _environment(check: dict[str, Any] | None) -> list[dict[str, str]]:
    """Every probe's facts as (group, name, value) rows."""
    return [row for probe, facts in sorted(_d(_d(check).get("facts")).items())
            if probe != "topology"  # drawn in its own section
            for row in flatten(str(probe), facts)]


def _topology(topo: dict[str, Any] | None, check: dict[str, Any] | None) -> dict[str, Any] | None:
    facts = topo or _d(_d(_d(check).get("facts")).get("topology")) or None
    if not facts:
        return None
    text, note = None, ""
    from distdoctor.probes.topology import draw_text

    try:
        text = draw_text(facts)
    except Exception as exc:  # a drawing bug must not lose the whole report
        note = f"text drawing failed: {type(exc).__name__}: {exc}"
    return {"text": text, "note": note, "facts": facts,
            "summary": {k: facts.get(k) for k in ("source", "p2p", "nvlink") if k in facts},
            "advice": [_d(a).get("text") or str(a) for a in _l(facts.get("advice"))]}


def _answers(record: Mapping[str, Any]) -> list[dict[str, str]]:
    rows = [{"question": str(_d(e.get("data")).get("question", "")),
             "answer": str(_d(e.get("data")).get("answer", ""))}
            for e in _l(record.get("events")) if isinstance(e, dict) and e.get("kind") == "answer"]
    for question, answer in _d(record.get("answers")).items():
        if not any(r["question"] == str(question) for r in rows):
            rows.append({"question": str(question), "answer": _cell(answer)})
    return rows


def build_report(record: Mapping[str, Any], kb: Any, *, redact: bool = True,
                 pseudonymize: bool = False, mapping_path: Path | None = None) -> dict[str, Any]:
    """The whole report as a JSON-able dict. Redaction (on by default) masks secret-named values
    and token-shaped strings everywhere; `pseudonymize` also swaps host names, addresses and user
    names for stable tokens, keeping the mapping in `mapping_path` (default: next to the session;
    0600, never in the report)."""
    trimmed = _trim(record)
    source = redact_record(trimmed) if redact else trimmed
    check, logs, topo = latest(source, "check"), latest(source, "logs"), latest(source, "topo")
    repro, bisect, fleet = latest(source, "repro"), latest(source, "bisect"), latest(source, "fleet")
    conclusion = conclude(source, kb, latest)
    diagnosis = report_verdict.diagnosis_of(source, kb)
    # each cause with its basis and evidence; the ones resting on neither are "also considered"
    annotate(_l(conclusion["conclusion"].get("causes")), _findings(check), _evidence(logs))
    shown = {c["id"] for c in split(_l(conclusion["conclusion"].get("causes")))[0]}
    conclusion["fixes"] = [f for f in conclusion["fixes"]  # no fix for a cause nothing points at
                           if f.get("cause") in shown or f.get("title") == "From the bisection"]
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "title": f"distdoctor report: session {source.get('id', '?')}",
        "verdict": report_verdict.verdict(diagnosis, kb),
        "ranks": report_verdict.ranks_table(diagnosis),
        "session": {"id": source.get("id"), "host": source.get("host"),
                    "created": _iso(source.get("created")), "updated": _iso(source.get("updated"))},
        "generated": _iso(time.time()),
        "versions": {"distdoctor": _version(), "knowledge": str(getattr(kb, "version", "?"))},
        "redacted": bool(redact), "pseudonymized": bool(pseudonymize),
        "symptom": _symptom(source, kb),
        "answers": _answers(source),
        "steps": _steps(source, kb),
        "findings": _findings(check),
        "evidence": _evidence(logs),
        "logs": {k: _d(logs).get(k) for k in ("files_read", "bytes_read", "first_failure", "skipped")}
        if logs else None,
        "environment": _environment(check),
        "topology": _topology(topo, check),
        "repro": repro_section(repro),
        "bisect": bisect_section(bisect),
        "fleet": tabulate(fleet) if fleet is not None else None,
        "stacks": _stacks_section(latest(source, "stacks")),
        "flight_recorder": _fr_section(latest(source, "fr")),
        "conclusion": conclusion["conclusion"],
        "fixes": conclusion["fixes"],
        "switches_to_remove": switches_to_remove(source, kb, latest),
    }
    if redact:
        report = walk(report, redact_text, mask_keys=True)
    if pseudonymize:
        report = _pseudonymize(report, trimmed, mapping_path)
    return report


def _culprit_row(doc: Mapping[str, Any]) -> list[list[Any]]:
    c = _d(doc.get("culprit"))
    if not c:
        return [["culprit", "none named"]]
    return [["culprit", f"rank {', '.join(str(r) for r in _l(c.get('ranks')))} ({c.get('role')})"],
            ["why", c.get("why")]]


def _stacks_section(doc: Any) -> dict[str, Any] | None:
    """Where every rank was when its stack was taken: the groups, then the odd ranks out."""
    if not isinstance(doc, dict):
        return None
    groups = [[", ".join(str(r) for r in _l(g.get("ranks"))), g.get("where")] for g in _l(doc.get("groups"))]
    odd = [[o.get("rank"), o.get("where"), o.get("why")] for o in _l(doc.get("odd"))]
    tables = [{"title": "Ranks by where they were", "columns": ["ranks", "where"], "rows": groups}]
    if odd:
        tables.append({"title": "Odd ranks out", "columns": ["rank", "where", "why"], "rows": odd})
    return {"summary": _culprit_row(doc), "tables": tables}


def _fr_section(doc: Any) -> dict[str, Any] | None:
    """The Flight Recorder comparison: per process group, the last collective each rank
    completed and the first one where they disagree."""
    if not isinstance(doc, dict):
        return None
    rows = []
    for g in _l(doc.get("groups")):
        m = _d(g.get("first_mismatch"))
        last = ", ".join(f"{r}: {q}" for r, q in _d(g.get("last_completed")).items())
        rows.append([g.get("pg"), ", ".join(str(r) for r in _l(g.get("ranks"))), last,
                     f"#{m.get('seq')} {m.get('kind')} (rank {', '.join(map(str, _l(m.get('ranks'))))}): "
                     f"{m.get('detail', '')}" if m else "none"])
    return {"summary": _culprit_row(doc), "tables": [{"title": "Process groups", "rows": rows,
            "columns": ["group", "ranks", "last completed (rank: seq)", "first mismatch"]}]}


def _trim(record: Mapping[str, Any]) -> dict[str, Any]:
    """A shallow copy whose repro log (text, or the path of its file) is replaced by the tail the
    report shows: megabytes of output that never reach the report need no redaction."""
    events = []
    for event in _l(record.get("events")):
        data = _d(event).get("data")
        if isinstance(data, dict) and event.get("kind") == "repro" and isinstance(data.get("log"), str):
            event = {**event, "data": {**data, "log": log_tail(data["log"])}}
        events.append(event)
    return {**record, "events": events}


def redact_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record with secrets masked, before anything flattens keys away from their values."""
    out = redact(dict(record))
    return out if isinstance(out, dict) else {}


def _default_mapping_path(record: Mapping[str, Any]) -> Path | None:
    """Next to the session: <state>/distdoctor/sessions/<id>.pseudonyms.json."""
    from .session import SessionError, SessionStore

    try:
        return SessionStore().pseudonyms_path(str(record.get("id") or ""))
    except SessionError:
        return None  # no usable id: tokens stay consistent within this one report only


def _login_name() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a container uid with no passwd entry
        return os.environ.get("USER", "")


def _pseudonymize(report: dict[str, Any], record: Mapping[str, Any],
                  mapping_path: Path | None) -> dict[str, Any]:
    from .pseudonym import Pseudonymizer

    if mapping_path is None:
        mapping_path = _default_mapping_path(record)
    names = Pseudonymizer.load(mapping_path) if mapping_path else Pseudonymizer()  # ValueError: unreadable
    # The record, not the report: its keys say which values are hosts and users (MASTER_ADDR,
    # USER), and everything in the report was derived from it.
    names.learn(record)
    names.learn_user(_login_name())  # whoever writes the report ran the job or reads its logs
    out = names.apply_all(report)
    names.save()
    return out if isinstance(out, dict) else {}


def export_report(record: Mapping[str, Any], kb: Any, fmt: str, path: str | os.PathLike[str] | None = None,
                  *, redact: bool = True, pseudonymize: bool = False,
                  mapping_path: Path | None = None) -> str:
    """Build and render a report (fmt: md, html or json); write it to `path` when given, readable
    by its owner only when unredacted. Returns the text. Raises OSError when it cannot write and
    ValueError for an unknown format or an unreadable pseudonym mapping."""
    if fmt not in RENDERERS:
        raise ValueError(f"unknown report format {fmt!r} (expected one of {', '.join(RENDERERS)})")
    text = RENDERERS[fmt](build_report(record, kb, redact=redact, pseudonymize=pseudonymize,
                                       mapping_path=mapping_path))
    if path is not None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666 if redact else 0o600)
        if not redact and stat.S_ISREG(os.fstat(fd).st_mode):
            os.fchmod(fd, 0o600)  # O_CREAT's mode does not apply to a file that already existed
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
    return text
