"""A session's events as typed evidence for the one diagnosis (knowledge/diagnosis.py).

The app's Logs and Conclusion steps and the md/html/json reports call `diagnose_flow` (through
diagnosis_view.session_diagnosis for the verdict); the `logs` command calls `diagnose()` on the
same log evidence, so the three agree field by field (tests/app/test_diagnosis_agree.py)."""
from __future__ import annotations

from typing import Any

from distdoctor.knowledge.diagnosis import Diagnosis, IncidentEvidence, diagnose
from distdoctor.knowledge.i18n import t


def _baseline_rules_out(kb: Any) -> tuple[str, ...]:
    """The causes a passing minimal repro weakens (causes.toml `repro_pass`)."""
    from distdoctor.probes.repro.bisect import after_a_pass

    return after_a_pass(kb)["rules_out"]


def _implicates(kb: Any, verdict: dict[str, Any]) -> tuple[str, ...]:
    """The causes the winning switch implicates (switches.toml), when the verdict names only the
    switch (by id, or by the NAME=VALUE that ran)."""
    named = str(verdict.get("switch") or "")
    env = str(verdict.get("env") or "").split("=", 1)[0]
    for sw in getattr(kb, "switches", {}).values():
        if sw.id == named or (env and sw.env == env):
            return tuple(sw.implicates)
    return ()


def evidence_of(flow: Any, kb: Any) -> IncidentEvidence:
    """Everything a session (a tui.record.state.Flow) gathered, typed by its source."""
    events = flow.events
    logs = events.get("logs") if isinstance(events.get("logs"), dict) else None
    repro = events.get("repro") or {}
    repro_causes = [c if isinstance(c, dict) else {"id": c, "score": 1.0} for c in repro.get("causes") or []]
    bisect = events.get("bisect") or {}
    # passing_switch; "verdict" in sessions saved before it had its own name
    passing = bisect.get("passing_switch") or bisect.get("verdict")
    verdict = passing if isinstance(passing, dict) else None
    implicated = {}
    if verdict:
        for cause_id in verdict.get("causes") or [verdict.get("cause")] if (
                verdict.get("causes") or verdict.get("cause")) else _implicates(kb, verdict):
            if cause_id:
                implicated[str(cause_id)] = t("the job passes only with {env}", env=verdict.get("env", "?"))
    ruled_out = {}
    if bisect.get("baseline_passed") or repro.get("outcome") == "pass":
        for cause_id in bisect.get("rules_out") or _baseline_rules_out(kb):
            ruled_out[str(cause_id)] = t("the minimal repro passes on this node")
    if flow.paste_causes:  # a pasted line is log evidence too
        logs = dict(logs or {}, causes=list((logs or {}).get("causes") or []) + list(flow.paste_causes))
    symptom = flow.symptom or (logs or {}).get("symptom") or flow.kind
    return IncidentEvidence(symptom=symptom, logs=logs, findings=tuple(f.to_dict() for f in flow.findings),
                            fleet=tuple((events.get("fleet") or {}).get("disagreements") or []),
                            bisect=implicated, ruled_out=ruled_out, live=tuple(live_items(events)),
                            repro_causes=tuple(repro_causes),
                            collect=tuple(_verdict(logs).get("collect") or ()),
                            seen_before=tuple(_verdict(logs).get("seen_before") or ()),
                            hardware=tuple(hardware_events(events.get("check"))))


def hardware_events(check: Any) -> list[dict[str, Any]]:
    """The node's hardware Xids with their times (the kernel probe's facts in a check event), for
    the diagnosis to line up with the moment a rank died: one event per first and last time."""
    from distdoctor.probes.hardware.kernel import when

    facts = check.get("facts") if isinstance(check, dict) else None
    kernel = facts.get("kernel") if isinstance(facts, dict) else None
    out: list[dict[str, Any]] = []
    for xid in (kernel or {}).get("xids") or [] if isinstance(kernel, dict) else []:
        if not isinstance(xid, dict) or xid.get("category") != "hardware":
            continue
        what = f"Xid {xid.get('code')} ({xid.get('name')}) on {xid.get('bus')}"
        times = {xid.get("time"), when(str(xid.get("last") or "")).get("time")} - {None, ""}
        out.extend({"cause": "gpu-hardware-fault", "what": what, "time": at, "host": check.get("host")}
                   for at in sorted(times))
    return out


def _verdict(logs: Any) -> dict[str, Any]:
    verdict = (logs or {}).get("verdict") if isinstance(logs, dict) else None
    return verdict if isinstance(verdict, dict) else {}


def live_items(events: dict[str, Any]) -> list[dict[str, Any]]:
    """Evidence items recorded by stacks, fr, ras, lint, run/watch and hardware checks (each
    event may carry an "evidence" list)."""
    out: list[dict[str, Any]] = []
    for kind in ("stacks", "fr", "ras", "lint", "run", "watch", "hardware"):
        event = events.get(kind)
        items = event.get("evidence") if isinstance(event, dict) else None
        out.extend(x for x in items or [] if isinstance(x, dict))
    return out


def diagnose_flow(kb: Any, flow: Any) -> Diagnosis:
    """The one diagnosis of a session."""
    return diagnose(kb, evidence_of(flow, kb))
