"""What to do next on each step, from the session so far and the knowledge base's tree."""
from __future__ import annotations

from typing import Any

from ..record.state import Flow, is_stopped, suspects
from .lang import resolve, t


def _next_hint(kb: Any, step_id: str, order: list[str]) -> str:
    """'n: <title of the step after this one>' from the tree's edges, not a fixed sequence."""
    step = kb.steps.get(step_id)
    nxt = step.next[0] if step and step.next else ""
    if not nxt or nxt not in kb.steps:
        return ""
    return t("Next: n for '{title}'.", title=kb.steps[nxt].title)


def _title(kb: Any, cause_id: str) -> str:
    cause = kb.causes.get(cause_id)
    return cause.title if cause else cause_id


def run_outcome(kb: Any, step_id: str, event: dict[str, Any]) -> str:
    """One sentence on a finished repro or bisection."""
    if step_id == "repro":
        outcome = str(event.get("outcome") or "?").upper()
        if outcome == "PASS":
            return t("Minimal repro PASS: this node's local setup works.")
        why = str(event.get("first_error") or (t("stuck at {where}", where=event["stuck_at"])
                                               if event.get("stuck_at") else ""))
        why = (why.splitlines() or [""])[0][:100]  # the panel has room for two or three lines
        return (t("Minimal repro {outcome}: {why}.", outcome=t(outcome), why=why) if why
                else t("Minimal repro {outcome}.", outcome=t(outcome)))
    verdict = event.get("verdict")
    if isinstance(verdict, dict):
        cause = verdict.get("cause_title") or _title(kb, str(verdict.get("cause", "")))
        if verdict.get("cause") in kb.causes and resolve() != "en":
            cause = _title(kb, str(verdict["cause"]))  # the title in the language spoken now
        return t("Bisection: passes only with {env}: {cause}.", env=verdict.get("env", "?"), cause=cause)
    if event.get("baseline_passed"):
        return t("Bisection: the baseline passes; this node's local setup works.")
    return t("Bisection: no single switch made it pass.")


def _crashed(flow: Flow) -> str:
    """The ranks the logs name as crashed (their own failure line), or ""."""
    verdict = (flow.events.get("logs") or {}).get("verdict")
    who = verdict.get("culprit") if isinstance(verdict, dict) else None
    if isinstance(who, dict) and who.get("role") == "crashed" and who.get("ranks"):
        return ", ".join(str(r) for r in who["ranks"])
    return ""


def next_action(kb: Any, flow: Flow, step_id: str, order: list[str], running: str = "") -> str:
    """One or two sentences: what the user should do now on this step."""
    if running:
        return running
    hint = _next_hint(kb, step_id, order)
    if step_id == "classify":
        if not flow.kind and not flow.pasted:
            return t("Say what you see: choose Hang or Error (arrows, Enter), or paste an error line.")
        if not flow.symptom and not flow.paste_causes:
            # English names the kind by its id ("hang"), as it always did; Chinese by its title
            kind = (kb.symptoms[flow.kind].title if flow.kind in kb.symptoms and resolve() != "en"
                    else flow.kind or t("problem"))
            return t("Choose where the {kind} happens, or paste an error line.", kind=kind)
        top = suspects(kb, flow.symptom)
        lead = flow.paste_causes[0]["id"] if flow.paste_causes else (top[0]["id"] if top else "")
        return t("First suspect: {title}. {hint}", title=_title(kb, lead), hint=hint).strip() if lead else hint
    if step_id == "logs":
        event = flow.events.get("logs")
        if not event and flow.kind == "hang":
            # during a hang the logs usually say nothing: where each rank is now says more
            return t("If the job still hangs, press s: every rank's stack now, and the odd one out. "
                     "Then load its logs (f) or copy the logging lines (c).")
        if not event:
            return t("Copy the logging lines (c) into the job, rerun it, then press f, type the logs' path and Enter.")
        causes = event.get("causes") or []
        if not causes:
            return t("No known failure signature in {n} path(s). {hint}", n=len(flow.log_paths), hint=hint).strip()
        who = (event.get("verdict") or {}).get("culprit") if isinstance(event.get("verdict"), dict) else None
        named = t("Rank {ranks} {role}; ", ranks=", ".join(map(str, who.get("ranks") or [])),
                  role=t(str(who.get("role")))) if isinstance(who, dict) else ""
        return t("{named}logs point at: {title}. Enter on an evidence line shows it. {hint}", named=named,
                 title=_title(kb, causes[0]["id"]), hint=hint).strip()
    if step_id == "environment":
        if not flow.done("environment"):
            return t("Probes run when this step opens; r reruns them.")
        findings = flow.findings
        fails = [f for f in findings if f.get("status") == "fail"]
        warns = [f for f in findings if f.get("status") == "warn"]
        if not fails and not warns:
            return t("No FAIL or WARN on this node. {hint}", hint=hint).strip()
        worst = (fails or warns)[0]
        return t("{fails} FAIL, {warns} WARN; first: {title}. {hint}", fails=len(fails), warns=len(warns),
                 title=worst.get("title", ""), hint=hint).strip()
    if step_id in ("repro", "bisect"):
        event = flow.events.get(step_id)
        what = t("minimal repro" if step_id == "repro" else "bisection")
        if not event:
            crashed = _crashed(flow)
            if crashed and "conclusion" in order:
                # a clear crash in the logs: this node's transports are not in question
                return t("The logs show rank {ranks} crashed: the {what} tests this node's transports, "
                         "not that crash. {n} skips to Conclusion; r runs it anyway.", ranks=crashed,
                         what=what, n=order.index("conclusion") + 1)
            return t("r runs the {what} (x stops it). {hint}", what=what, hint=hint).strip()
        if is_stopped(event):
            return t("The {what} was stopped before a result; r runs it again.", what=what)
        return f"{run_outcome(kb, step_id, event)} {hint}".strip()
    if step_id == "conclusion":
        if not flow.events:
            return t("No evidence yet: classify the symptom first (1), or load the job's logs (2).")
        return t("Apply the fix of the top cause, remove the debugging switches, e exports the report.")
    step = kb.steps.get(step_id)
    return (step.why if step else "") + (" " + hint if hint else "")
