"""A session written by a process killed with SIGKILL mid-write is never corrupt (atomic rename)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from distdoctor.tui.record.session import SessionStore

# Appends events with a large payload in a loop. It says "w N" just before writing event N and
# "d N" once that append finished, so the test can kill it while a write is under way.
WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from distdoctor.tui.record import session

    real_write = session.write_atomic
    current = [0]

    def announced_write(path, text):
        print("w", current[0], flush=True)
        real_write(path, text)

    session.write_atomic = announced_write
    store = session.SessionStore(Path(sys.argv[1]))
    pad = "x" * PAD
    while True:
        store.append("killed", "check", {"n": current[0], "pad": pad})
        print("d", current[0], flush=True)
        current[0] += 1
""")
PAD = 100_000


@pytest.mark.slow
@pytest.mark.parametrize("kill_after", [1, 6, 12, 20])
def test_sigkill_mid_write_leaves_a_complete_record(tmp_path: Path, kill_after: int) -> None:
    directory = tmp_path / "sessions"
    proc = subprocess.Popen([sys.executable, "-c", WRITER.replace("PAD", str(PAD)), str(directory)],
                            stdout=subprocess.PIPE, text=True)
    try:
        last_done = -1
        assert proc.stdout is not None
        for line in proc.stdout:  # progress is awaited line by line: no sleeps, no polling
            what, n = line.split()
            if what == "d":
                last_done = int(n)
            elif int(n) == kill_after:
                os.kill(proc.pid, signal.SIGKILL)  # the write of event `kill_after` is under way
                break
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert last_done == kill_after - 1

    path = directory / "killed.json"
    record = json.loads(path.read_text(encoding="utf-8"))  # must parse: never a torn file
    numbers = [e["data"]["n"] for e in record["events"]]
    # every event up to the last completed one, in order, and at most the one being written after
    assert numbers == list(range(len(numbers)))
    assert last_done + 1 <= len(numbers) <= last_done + 2
    assert all(e["data"]["pad"] == "x" * PAD for e in record["events"])

    store = SessionStore(directory)
    assert store.load("killed")["events"][-1]["data"]["n"] == numbers[-1]
    assert store.load("last")["id"] == "killed"
    # a temporary file the killed writer left behind is never mistaken for a session
    assert [s["id"] for s in store.list()] == ["killed"]
    for tmp in directory.glob(".*.tmp"):
        os.utime(tmp, (0, 0))
    store.remove_stale_tmp()
    assert not list(directory.glob(".*.tmp"))
