"""What to do next on a step: each step's screen says it (`StepScreen.next_action`), from the
session so far and the knowledge base's tree, with the helpers here."""
from __future__ import annotations

from typing import Any

from ..record.state import Flow
from .lang import resolve, t


def next_hint(kb: Any, step_id: str) -> str:
    """'n: <title of the step after this one>' from the tree's edges, not a fixed sequence."""
    step = kb.steps.get(step_id)
    nxt = step.next[0] if step and step.next else ""
    if not nxt or nxt not in kb.steps:
        return ""
    return t("Next: n for '{title}'.", title=kb.steps[nxt].title)


def cause_title(kb: Any, cause_id: str) -> str:
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
        cause = verdict.get("cause_title") or cause_title(kb, str(verdict.get("cause", "")))
        if verdict.get("cause") in kb.causes and resolve() != "en":
            cause = cause_title(kb, str(verdict["cause"]))  # the title in the language spoken now
        return t("Bisection: passes only with {env}: {cause}.", env=verdict.get("env", "?"), cause=cause)
    if event.get("baseline_passed"):
        return t("Bisection: the baseline passes; this node's local setup works.")
    return t("Bisection: no single switch made it pass.")


def crashed_ranks(flow: Flow) -> str:
    """The ranks the logs name as crashed (their own failure line), or ""."""
    verdict = (flow.events.get("logs") or {}).get("verdict")
    who = verdict.get("culprit") if isinstance(verdict, dict) else None
    if isinstance(who, dict) and who.get("role") == "crashed" and who.get("ranks"):
        return ", ".join(str(r) for r in who["ranks"])
    return ""


def next_action(kb: Any, flow: Flow, step_id: str, order: list[str], running: str = "") -> str:
    """One or two sentences: what the user should do now on this step (its screen says which)."""
    if running:
        return running
    from .steps import screen_class

    return screen_class(step_id).next_action(kb, flow, step_id, order)
