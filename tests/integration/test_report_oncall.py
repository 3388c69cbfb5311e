"""The report as a newcomer reads it (issue 24, items 15 to 19): one verdict box (culprit, where,
confidence, cause and where it is explained, fix, recurrence) from the one diagnosis; a per-rank
table; no "rank None", no "Symptom ?", no raw JSON in the run tables, no header row of blanks;
the symptom's usual suspects are three names, not a scored list. md, html, and the html rendered
by headless Chromium where it is installed."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.logs import analyse
from distdoctor.tui.record.report import build_report, render_html, render_markdown

KB = load_knowledge(use_env=False)
FIX = Path(__file__).parents[1] / "fixtures"
BROWSER = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)


def crash_record() -> dict:
    logs = dict(analyse([str(FIX / "recorded" / "incident-crash" / "logs")], KB).to_dict(),
                paths=[str(FIX / "recorded" / "incident-crash" / "logs")])
    repro = {"outcome": "pass", "duration_s": 4.2, "nproc": 2,
             "exit_codes": {"launcher": 0, "ranks": {"0": 0, "1": 0}}, "progress": {"0": "done", "1": "done"},
             "cleanup": {"survivors": [], "port_free": True}, "command": ["/venv/bin/python", "-m", "torch.distributed.run"]}
    events = [{"kind": "classify", "data": {"text": "RuntimeError: boom", "matches": []}},
              {"kind": "logs", "data": logs}, {"kind": "repro", "data": repro}]
    return {"id": "crash-1", "host": "node01", "created": 0, "updated": 0, "events": events}


def test_the_verdict_is_one_box_from_the_one_diagnosis() -> None:
    report = build_report(crash_record(), KB)
    v = report["verdict"]
    assert v["culprit"]["ranks"] == ["1"] and v["confidence"] in ("confirmed", "likely")
    assert v["cause"] == "rank-crash-deadlock" and v["explain"] == "distdoctor knowledge show rank-crash-deadlock"
    md = render_markdown(report)
    box = md.split("## Verdict\n", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in box.strip().splitlines()]
    assert all(ln.startswith(">") for ln in lines), box  # one quoted box
    assert lines[0].startswith("> **Culprit: rank 1 (crashed)** at `") and "**confirmed**" in lines[0] or \
        "**likely**" in lines[0]
    for label in ("What happened:", "Cause:", "Fix:", "Recurrence:"):
        assert sum(label in ln for ln in lines) == 1, (label, box)
    assert "distdoctor knowledge show rank-crash-deadlock" in box
    # the story is said once, not as two paragraphs that repeat each other
    assert box.count("Corrupted record") <= 1
    html = render_html(report)
    assert re.search(r'<div class="verdict v-(confirmed|likely)">', html)
    assert html.index('class="verdict') < html.index("How each rank ended") < html.index("<h2>Symptom</h2>")


def test_each_rank_has_a_row() -> None:
    report = build_report(crash_record(), KB)
    table = report["ranks"]
    assert table["columns"][:3] == ["rank", "ended", "last step"]
    rows = {r[0]: r for r in table["rows"]}
    assert set(rows) == {"0", "1"} and rows["1"][1] == "crashed"
    md = render_markdown(report)
    assert "## How each rank ended" in md and re.search(r"\| 1 \| crashed \| (step \d+)? \|", md)


def test_no_rank_none_no_question_mark_symptom_no_raw_json_no_blank_headers() -> None:
    record = crash_record()
    logs = record["events"][1]["data"]
    logs["first_failure"] = {"rank": None, "file": "/logs/console.log", "line": 7, "text": "boom"}
    report = build_report(record, KB)
    md, html = render_markdown(report), render_html(report)
    assert "rank , " not in md and "rank None" not in html and "rank None" not in md
    assert "First failure: /logs/console.log:7" in md
    assert "**?**" not in md and "not chosen (only a line was pasted)" in md
    repro = md.split("## Minimal repro", 1)[1].split("\n## ", 1)[0]
    assert "{" not in repro and "launcher 0; rank 0: 0; rank 1: 0" in repro and "no process left; port free" in repro
    assert "|  |  |" not in md.split("## Session")[0]  # a header of blanks only in the session block
    assert "<th></th><th></th>" not in html


def test_the_symptoms_suspects_are_three_names_without_scores() -> None:
    record = crash_record()
    suspects = [{"id": c, "why": "5.5 = Hang at init 2.5 + Hang 1"} for c in list(KB.causes)[:13]]
    record["events"][0] = {"kind": "classify", "data": {"symptom": "hang", "kind": "hang", "suspects": suspects}}
    md = render_markdown(build_report(record, KB))
    symptom = md.split("## Symptom\n", 1)[1].split("\n## ", 1)[0]
    assert "5.5 =" not in symptom and "and 10 more" in symptom
    assert len(re.findall(r"^\d+\. `", symptom, re.M)) == 3


def test_the_json_verdict_is_the_same_in_both_languages_but_for_words() -> None:
    from distdoctor.knowledge import i18n

    en = build_report(crash_record(), KB)
    i18n.set_lang("zh")
    try:
        zh = build_report(crash_record(), load_knowledge(use_env=False, lang="zh"))
        md = render_markdown(zh)
    finally:
        i18n.set_lang("en")
    for key in ("confidence", "cause", "recurrence", "explain"):
        assert en["verdict"][key] == zh["verdict"][key], key
    for key in ("ranks", "role", "location"):
        assert en["verdict"]["culprit"][key] == zh["verdict"]["culprit"][key], key
    assert en["ranks"] == zh["ranks"]
    assert "各 rank 的结束方式" in md and "详细解释" in md
    json.dumps(en)


@pytest.mark.slow
@pytest.mark.skipif(BROWSER is None, reason="chromium not installed (apt-get install chromium)")
def test_chromium_renders_the_box_first(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    page.write_text(render_html(build_report(crash_record(), KB)), encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run([str(BROWSER), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                              "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert html.index('<div class="verdict') < html.index("<h2>How each rank ended</h2>") < html.index("<h2>Conclusion</h2>")
    assert "<dt>Recurrence:</dt>" in html and "<dt>Fix:</dt>" in html
