"""The Classify step for a worker that raised: the answer is offered, and a pasted multi-line
traceback is kept whole and matched at once (the real Textual app under Pilot)."""
from __future__ import annotations

from pathlib import Path

import appkit
from appkit import run_async, screen_text
from textual import events

from distdoctor.tui.record.session import SessionStore

TRACEBACK = """[rank1]: Traceback (most recent call last):
[rank1]:   File "/home/user/train.py", line 19, in <module>
[rank1]:     raise RuntimeError("bad batch at step 5: NaN in input features")
[rank1]: RuntimeError: bad batch at step 5: NaN in input features
[rank0]: RuntimeError: [/opt/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [10.1.0.2]:40123. This is typically caused by a remote worker crashing or bugs in the application.
"""


def classify_events(app, session: str) -> list[dict]:
    assert app.saver.flush(timeout=30)
    return [e["data"] for e in SessionStore(app.store.directory).load(session)["events"] if e["kind"] == "classify"]


@run_async
async def test_a_pasted_traceback_is_matched_whole_and_names_the_rank(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.ERROR_ENV, session_id="paste")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("down", "enter")  # Error
        await pilot.pause()
        text = screen_text(app)
        assert "A worker crashed or raised an exception" in text
        await pilot.press("slash")
        box = app.focused
        assert box is not None and box.id == "paste"
        box.post_message(events.Paste(TRACEBACK))
        await pilot.pause()
        for worker in list(app.workers):
            await worker.wait()
        await pilot.pause()
        assert "+4 lines pasted" in box.value  # the field shows the last line and a count
        saved = classify_events(app, "paste")[-1]
        assert saved["text"].count("\n") >= 4  # the whole traceback, not its first line
        assert saved["matches"][0]["id"] == "rank-crash-deadlock"
        assert "rank 1 crashed" in screen_text(app)


@run_async
async def test_a_single_line_paste_stays_an_editable_line(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.ERROR_ENV, session_id="one")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("slash")
        box = app.focused
        box.post_message(events.Paste("NCCL WARN Cuda failure 'out of memory'"))
        await pilot.pause()
        assert box.value == "NCCL WARN Cuda failure 'out of memory'" and box.full == ""
