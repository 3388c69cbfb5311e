"""The report's causes as a reader who was not there needs them: each with its basis and the
evidence behind it (log lines, checks, runs) instead of a bare score, and the causes that rest
on neither evidence nor a failed check folded under "also considered"."""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

SHOWN_LINES = 3  # evidence lines quoted per cause; the Log evidence section has them all
# Reasons that are evidence about this incident rather than the symptom's usual suspects
STRONG = ("logs (evidence)", "logs:", "bisect:", "fleet:", "stacks:", "fr:", "ras:", "lint:", "repro:")
_SCORE = re.compile(r"(?:\bscore|得分) -?\d+(?:\.\d+)?(?:,\s*|，)?")


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def short_file(path: Any) -> str:
    """`1/stderr.log` for torchrun's per-rank folders, else the file name, as the logs step names it."""
    from distdoctor.knowledge.logs.timeline import short

    return short(str(path or "?"))


def plain_reason(reason: Any) -> str:
    """A reason without its internal score ("logs (evidence): 8 evidence lines")."""
    text = _SCORE.sub("", str(reason)).replace(": ,", ":").strip()
    return re.sub(r"[:：]\s*$", "", text)


def annotate(causes: Iterable[dict[str, Any]], findings: Iterable[Mapping[str, Any]],
             evidence: Iterable[Mapping[str, Any]]) -> None:
    """Add to each cause (in place): basis, its log lines (a few, by short file name), the checks
    that name it, the reasons without scores, and `considered`: True when it rests on neither
    evidence nor a failed check (shown under "also considered")."""
    lines: dict[str, list[Mapping[str, Any]]] = {}
    for ev in evidence:
        lines.setdefault(str(ev.get("cause")), []).append(ev)
    checks: dict[str, list[Mapping[str, Any]]] = {}
    for f in findings:
        if str(f.get("status")) in ("fail", "error", "warn"):
            for cause_id in _l(f.get("cause_ids")):
                checks.setdefault(str(cause_id), []).append(f)
    for cause in causes:
        cid = str(cause.get("id"))
        why = [str(w) for w in _l(cause.get("why"))]
        own = lines.get(cid, [])
        named = checks.get(cid, [])
        failed = [f for f in named if str(f.get("status")) in ("fail", "error")]
        # the engine says which reasons are this incident's evidence; an older record, its English prefixes
        strong = cause["strong"] if isinstance(cause.get("strong"), bool) else any(w.startswith(STRONG) for w in why)
        basis = str(cause.get("basis") or ("evidence" if own or strong else "checks" if failed else "prior"))
        cause["basis"] = basis
        cause["evidence_lines"] = [f"{short_file(e.get('file'))}:{e.get('line')}: {str(e.get('text', '')).strip()}"
                                   for e in own[:SHOWN_LINES]]
        cause["evidence_count"] = len(own)
        cause["checks"] = [f"{str(f.get('status')).upper()} {f.get('title')}" for f in named]
        cause["reasons"] = [plain_reason(w) for w in why]
        cause["considered"] = not (basis == "evidence" or own and basis != "facts" or strong or failed)


def split(causes: Iterable[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(causes with evidence or a failed check, the ones only considered); a report without any
    of the first keeps its top cause in the main list, so the verdict's cause is never folded."""
    causes = list(causes)
    main = [c for c in causes if not c.get("considered")]
    if not main and causes:
        main = causes[:1]
    return main, [c for c in causes if c not in main]


def basis_words(cause: Mapping[str, Any]) -> str:
    """"evidence: 8 log lines" / "prior: the symptom's usual suspects" ..."""
    basis = str(cause.get("basis") or "?")
    n = int(cause.get("evidence_count") or 0)
    if basis == "evidence":
        detail = f"{n} log line{'s' * (n != 1)}" if n else "runs or dumps"
    elif basis == "facts":
        detail = "what the logs and checks show about the setup"
    elif basis == "prior":
        detail = "the symptom's usual suspects"
    else:
        detail = ""
    return f"{basis}: {detail}" if detail else basis
