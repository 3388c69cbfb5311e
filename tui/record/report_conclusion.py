"""The report's conclusion: causes ranked from all the evidence, their fixes, switches to remove."""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Latest = Callable[[Mapping[str, Any], str], "dict[str, Any] | None"]

TOP_FIXES = 3

# Debugging switches NCCL and PyTorch say must not stay in production scripts, with the values
# that are harmless (defaults) and so need no removal.
DEBUG_SWITCHES: dict[str, tuple[str, frozenset[str]]] = {
    "NCCL_DEBUG": ("debug logging: floods the logs and slows start-up",
                   frozenset({"WARN", "VERSION", ""})),
    "NCCL_DEBUG_SUBSYS": ("debug logging subsystems", frozenset({""})),
    "NCCL_DEBUG_FILE": ("debug log files fill disks", frozenset({""})),
    "NCCL_P2P_DISABLE": ("turns GPU peer-to-peer off: slower; fix P2P (ACS/IOMMU) or make it "
                         "the documented default for this hardware", frozenset({"0", ""})),
    "NCCL_IB_DISABLE": ("turns InfiniBand/RoCE off: falls back to slow TCP sockets",
                        frozenset({"0", ""})),
    "NCCL_SHM_DISABLE": ("turns shared-memory transport off: slower; give the container more "
                         "/dev/shm instead", frozenset({"0", ""})),
    "TORCH_DISTRIBUTED_DEBUG": ("extra collective checks and logging: slows every step",
                                frozenset({"OFF", ""})),
    "TORCH_CPP_LOG_LEVEL": ("verbose C++ logging", frozenset({"WARNING", "ERROR", "FATAL", ""})),
    "TORCH_NCCL_DESYNC_DEBUG": ("desync debugging adds overhead", frozenset({"0", ""})),
    "TORCH_SHOW_CPP_STACKTRACES": ("debug stack traces", frozenset({"0", ""})),
    "CUDA_LAUNCH_BLOCKING": ("serialises every kernel launch: very slow", frozenset({"0", ""})),
}
_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Z][A-Z0-9_]*)\s*=\s*(.*?)\s*$")


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _ids(value: Any) -> list[str]:
    """Cause ids from a string, a list of strings, or dicts with an id."""
    if isinstance(value, str):
        return [value] if value else []
    out = []
    for item in _l(value):
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and isinstance(item.get("id"), str):
            out.append(item["id"])
    return out


def _switch(kb: Any, text: Any) -> tuple[str, str, Any]:
    """(env name, value, kb Switch or None) for a verdict's switch: an id, NAME=VALUE or a dict."""
    switches = getattr(kb, "switches", {}) or {}
    if isinstance(text, dict):
        name = str(text.get("env") or text.get("name") or text.get("id") or "")
        value = str(text.get("value") or "")
    else:
        name, _, value = str(text or "").partition("=")
    known = switches.get(name) or next((s for s in switches.values() if s.env == name), None)
    if known is not None:
        return known.env, value or ("" if known.value.startswith("<") else known.value), known
    return name, value, None


def bisect_verdict(bisect: dict[str, Any] | None, kb: Any) -> dict[str, Any] | None:
    """{"env", "value", "causes", "permanent_fix"} for a bisection that found a switch, else None."""
    verdict = _d(_d(bisect).get("verdict"))
    if not verdict.get("switch") and not verdict.get("env"):
        return None
    # "env" is the NAME=VALUE that ran; "switch" may be only the switch's id
    env, value, known = _switch(kb, verdict.get("env") or verdict["switch"])
    if known is None and verdict.get("switch"):
        known = _switch(kb, verdict["switch"])[2]
    causes = list(dict.fromkeys(_ids(verdict.get("cause")) + _ids(verdict.get("causes"))))
    if not causes and known is not None:
        causes = list(known.implicates)
    fix = verdict.get("permanent_fix") or verdict.get("fix") or getattr(known, "permanent_fix", "")
    return {"env": env, "value": value, "causes": causes, "permanent_fix": str(fix or "")}


def _combine(record: Mapping[str, Any], kb: Any) -> list[dict[str, Any]]:
    """The same ranking the app's Conclusion step shows (tui.ranking), replayed from the record."""
    from .ranking import rank_session
    from .state import Flow

    return [{"id": r.id, "score": r.score, "basis": r.basis, "why": list(r.reasons), "strong": r.strong}
            for r in rank_session(kb, Flow.from_record(record))]


# Reasons that are evidence about this incident; warnings and priors are only hints.
_STRONG = ("logs (evidence)", "logs:", "bisect:", "fleet:", "stacks:", "fr:", "ras:")


def _weak(causes: list[dict[str, Any]]) -> bool:
    return not any(w.startswith(_STRONG) or w.endswith(": FAIL") for c in causes for w in c["why"])


def conclude(record: Mapping[str, Any], kb: Any, latest: Latest) -> dict[str, Any]:
    """{"conclusion": {"source", "causes"}, "fixes": [...]} from the conclusion event if the app
    recorded one, else combined from logs, check findings, bisection, repro, fleet and priors."""
    event = latest(record, "conclusion")
    causes_kb = getattr(kb, "causes", {}) or {}
    note = ""
    if event is not None and _l(event.get("causes")):
        source = "conclusion"
        causes = []
        for c in _l(event.get("causes")):
            c = _d(c) if not isinstance(c, str) else {"id": c}
            reason = c.get("why")
            causes.append({"id": str(c.get("id", "?")), "score": c.get("score"), "basis": c.get("basis"),
                           "why": reason if isinstance(reason, list) else [str(reason)] if reason else []})
    else:
        causes = _combine(record, kb)
        source = "combined" if causes else "none"
        if causes and _weak(causes):
            note = ("Weak evidence: only warnings and the symptom's usual suspects point here. Read the "
                    "logs (distdoctor logs), run the minimal repro and bisect to confirm a cause.")
    for c in causes:
        c["title"] = getattr(causes_kb.get(c["id"]), "title", "")
    fixes = []
    for c in causes[:TOP_FIXES]:
        cause = causes_kb.get(c["id"])
        if cause is None:
            continue
        fixes.append({"cause": c["id"], "title": cause.title, "fix": cause.fix,
                      "fixes": [{"kind": f.kind, "text": f.text, "note": f.note} for f in cause.fixes]})
    verdict = bisect_verdict(latest(record, "bisect"), kb)
    if verdict and verdict["permanent_fix"]:
        fixes.insert(0, {"cause": ", ".join(verdict["causes"]), "title": "From the bisection",
                         "fix": verdict["permanent_fix"], "fixes": []})
    return {"conclusion": {"source": source, "causes": causes, "note": note}, "fixes": fixes}


def _env_pairs(obj: Any, path: str = "") -> list[tuple[str, str, str]]:
    """Every (name, value, where) of a debugging switch found anywhere in probe facts: as a key,
    or as a NAME=VALUE line (nccl.conf contents, env dumps)."""
    out: list[tuple[str, str, str]] = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            where = f"{path}.{key}" if path else str(key)
            if key in DEBUG_SWITCHES and isinstance(value, (str, int, float)):
                out.append((str(key), str(value), path or "environment"))
            elif key in DEBUG_SWITCHES and isinstance(value, dict) and "value" in value:
                # the switches probe: {"value": "INFO", "source": "env" or the nccl.conf path}
                source = str(value.get("source") or path or "environment")
                out.append((str(key), str(value["value"]), "environment" if source == "env" else source))
            else:
                out.extend(_env_pairs(value, where))
    elif isinstance(obj, list):
        for item in obj:
            out.extend(_env_pairs(item, path))
    elif isinstance(obj, str):
        for line in obj.splitlines():
            m = _ASSIGN.match(line)
            if m and m.group(1) in DEBUG_SWITCHES:
                out.append((m.group(1), m.group(2).strip("'\""), path or "environment"))
    return out


def switches_to_remove(record: Mapping[str, Any], kb: Any, latest: Latest) -> list[dict[str, str]]:
    """Debugging switches set in the checked environment or won in bisection, each with why it
    must go once the root cause is fixed."""
    found: dict[str, dict[str, str]] = {}
    facts = _d(latest(record, "check")).get("facts")
    for name, value, where in _env_pairs(facts):
        reason, harmless = DEBUG_SWITCHES[name]
        if value.strip().upper() not in harmless and name not in found:
            found[name] = {"name": name, "value": value, "where": where,
                           "why": f"{reason}; remove it once the root cause is fixed"}
    # NCCL_SOCKET_IFNAME and friends come only from bisection: in a job's environment they are
    # usually the fix itself, not a debugging switch.
    verdict = bisect_verdict(latest(record, "bisect"), kb)
    if verdict and verdict["env"]:
        name = verdict["env"]
        why = verdict["permanent_fix"] or (DEBUG_SWITCHES.get(name, ("a bisection switch",))[0])
        entry = found.get(name)
        found[name] = {"name": name, "value": verdict["value"] or (entry or {}).get("value", ""),
                       "where": "bisection verdict" + (f", {entry['where']}" if entry else ""),
                       "why": f"{why} (find the root cause, then remove this switch)"}
    return list(found.values())
