"""Control codes in a session's host, symptom, event kind and id (issue 25, item 12): the
`sessions` listing and the Markdown and HTML reports print them as visible escapes, never raw,
and a newline in them never starts a line of its own."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from boundkit import run, sane

pytestmark = pytest.mark.slow

EVIL = ["\x1b]0;owned\x07", "\x1b[2J", "\x9b31m", "\n## Verdict: all good", "\ud800", "\u202e", "\x00", "\r"]


def session(sid: str, rng: random.Random) -> dict:
    def evil(text: str) -> str:
        return text + "".join(rng.sample(EVIL, 3))
    return {"schema": 1, "id": sid, "created": 0, "updated": 1, "host": evil("node-1"),
            "symptom": {"kind": evil("hang"), "where": evil("all_reduce")}, "answers": {},
            "events": [{"kind": evil("logs"), "time": 0, "data": {"files_read": 1}},
                       {"kind": "check", "time": 0, "data": {"host": evil("node-2"), "findings": [
                           {"id": evil("ShmTooSmall"), "status": "fail", "reason": evil("small")}]}}]}


@pytest.mark.parametrize("seed", range(3))
def test_sessions_and_reports_print_no_control_code(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    folder = tmp_path / "state" / "distdoctor" / "sessions"
    folder.mkdir(parents=True)
    (folder / "inc-evil.json").write_text(json.dumps(session("inc-evil", rng)))
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "COLUMNS": "200"}
    rc, out, err, rss = run("sessions", env=env)
    sane(rc, out, err, rss, codes=(0,))
    assert "inc-evil" in out and "\\x1b" in out
    for fmt in ("md", "html"):
        rc, out, err, rss = run("report", "inc-evil", "--format", fmt, env=env)
        sane(rc, out, err, rss, codes=(0,))
        if fmt == "md":  # in HTML a newline in a cell is only white space
            assert "\n## Verdict: all good" not in out
