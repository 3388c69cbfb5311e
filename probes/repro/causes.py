"""Causes matched from a run's output: the log analyser, or a plain signature scan without it."""
from __future__ import annotations

import re
from typing import Any

from ...knowledge.model import KnowledgeBase

MAX_CAUSES = 5
MAX_EVIDENCE = 3


def match_causes(text: str, kb: KnowledgeBase | None, *, name: str = "<text>",
                 symptom: str | None = None) -> list[dict[str, Any]]:
    """[{"id", "score", "evidence": [{"file","line","text"}]}], best first."""
    if kb is None:
        from ...knowledge import load_knowledge
        kb = load_knowledge()
    from ...knowledge.logs import analyse_text

    report = analyse_text(text, kb, name=name, symptom=symptom)
    causes = []
    # leads rest on context lines only; in a repro the commonest is the banner of the torchrun
    # distdoctor itself started, which would name mixed-launchers in every failed run
    for item in [c for c in report.to_dict().get("causes", []) if not c.get("lead")][:MAX_CAUSES]:
        causes.append({"id": item["id"], "score": round(float(item["score"]), 3),
                       "evidence": list(item.get("evidence", []))[:MAX_EVIDENCE]})
    return causes


def scan_signatures(text: str, kb: KnowledgeBase, *, name: str = "<text>") -> list[dict[str, Any]]:
    """Every signature searched line by line; harmless lines never count."""
    harmless = [re.compile(h.pattern) for h in kb.harmless.values()]
    signatures = [(re.compile(s.pattern), s) for s in kb.signatures.values()]
    scores: dict[str, float] = {}
    evidence: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple[str, str]] = set()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or any(h.search(line) for h in harmless):
            continue
        for pattern, sig in signatures:
            if (sig.id, sig.cause) in seen or not pattern.search(line):
                continue
            seen.add((sig.id, sig.cause))  # a signature counts once per run, not per rank
            scores[sig.cause] = scores.get(sig.cause, 0.0) + sig.weight
            evidence.setdefault(sig.cause, []).append({"file": name, "line": number,
                                                       "text": line.strip()[:300]})
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_CAUSES]
    return [{"id": cause, "score": round(score, 3), "evidence": evidence[cause][:MAX_EVIDENCE]}
            for cause, score in ranked]
