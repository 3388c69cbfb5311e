"""The report of an incident with live-hang evidence: the verdict opens it, and the stack groups
and the Flight Recorder table are in md, html and json, redacted like everything else."""
from __future__ import annotations

import json
from pathlib import Path

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.logs import analyse
from distdoctor.probes.flightrec import as_evidence, read_and_analyse, to_json
from distdoctor.tui.record.report import build_report, render_html, render_markdown

KB = load_knowledge(use_env=False)
FIX = Path(__file__).parents[1] / "fixtures"


def record() -> dict:
    logs = analyse([str(FIX / "recorded" / "incident-hang" / "logs")], KB, symptom="hang").to_dict()
    fr = read_and_analyse([str(FIX / "fr" / "asymmetric" / "json")])
    stacks = {"ranks": [], "groups": [{"ranks": ["0", "2"], "where": "all_reduce (train.py:88)", "frames": []},
                                      {"ranks": ["1"], "where": "broadcast (train.py:91)", "frames": []}],
              "odd": [{"rank": "1", "where": "broadcast (train.py:91)",
                       "why": "in broadcast while 2 ranks are in all_reduce token=hf_abcdefghijklmnopqrstuvwxyz0123"}],
              "culprit": {"ranks": ["1"], "role": "stuck", "why": "rank 1 is in another collective"}}
    events = [{"kind": "classify", "data": {"symptom": "hang", "kind": "hang"}},
              {"kind": "logs", "data": logs},
              {"kind": "stacks", "data": stacks},
              {"kind": "fr", "data": {**to_json(fr), "evidence": as_evidence(fr)}}]
    return {"id": "hang-1", "host": "node01", "created": 0, "updated": 0, "events": events}


def test_verdict_first_then_stacks_and_flight_recorder() -> None:
    report = build_report(record(), KB)
    assert report["verdict"]["culprit"]["ranks"] == ["1"]
    assert "never reached" in report["verdict"]["summary"]
    md = render_markdown(report)
    assert md.index("## Verdict") < md.index("## Symptom") < md.index("## Stacks") < md.index("## Session")
    assert "broadcast (train.py:91)" in md and "## Flight Recorder" in md and "first mismatch" in md
    assert "hf_abcdefghijklmnopqrstuvwxyz0123" not in md  # redacted like everything else
    html = render_html(report)
    assert "<h2>Verdict</h2>" in html and "<h2>Flight Recorder</h2>" in html
    assert html.index("<h2>Verdict</h2>") < html.index("<h2>Session</h2>")
    data = json.loads(json.dumps(report))
    assert data["stacks"]["tables"][1]["rows"][0][0] == "1"
    assert data["flight_recorder"]["tables"][0]["rows"]
