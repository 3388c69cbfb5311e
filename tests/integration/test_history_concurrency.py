"""The incident store under load (issue 27): 8 processes writing at once for 10 s lose no
record; a writer killed with SIGKILL in the middle of its writes leaves a readable store."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distdoctor.tui.record.history import IncidentStore

WRITER = r"""
import json, sys, time
from distdoctor.tui.record.history import record_diagnosis
name, seconds, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
diagnosis = json.load(open(sys.argv[4]))
done, failed, end = [], [], time.monotonic() + seconds
while time.monotonic() < end:
    new_id = record_diagnosis(diagnosis, hosts={"1": name}, job=f"{name}-{len(done)}", on_error=failed.append)
    if new_id is None:
        break
    done.append(new_id)
    if out == "-":
        print(new_id, flush=True)
if out != "-":
    json.dump({"ids": done, "failed": failed}, open(out, "w"))
"""


@pytest.fixture
def logs_json(tmp_path: Path) -> Path:
    from distdoctor.knowledge import load_knowledge
    from distdoctor.knowledge.logs import analyse

    logs = Path(__file__).parents[1] / "fixtures" / "recorded" / "10-drill-wrong-nic" / "logs"
    path = tmp_path / "diagnosis.json"
    path.write_text(json.dumps(analyse([str(logs)], load_knowledge(None)).to_dict()))
    return path


@pytest.mark.slow
def test_eight_writers_for_ten_seconds_lose_nothing(tmp_path: Path, logs_json: Path) -> None:
    db = tmp_path / "incidents.db"
    env = {**os.environ, "DISTDOCTOR_DB": str(db)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, f"node-{n}", "10", str(tmp_path / f"w{n}.json"),
                               str(logs_json)], env=env) for n in range(8)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    results = [json.loads((tmp_path / f"w{n}.json").read_text()) for n in range(8)]
    assert all(r["failed"] == [] for r in results), [r["failed"] for r in results]
    ids = [i for r in results for i in r["ids"]]
    assert len(ids) == len(set(ids)) and all(len(r["ids"]) > 0 for r in results)
    with IncidentStore.open(db) as store:
        assert store.count() == len(ids)
        stored = store.query(limit=None)
        # each writer's every record, with its own host and sequence, is there
        for n, result in enumerate(results):
            jobs = {i.job for i in stored if i.culprit_host == f"node-{n}"}
            assert jobs == {f"node-{n}-{k}" for k in range(len(result["ids"]))}
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    print(f"8 writers, 10 s: {len(ids)} records, none lost")


@pytest.mark.slow
def test_a_writer_killed_mid_write_leaves_a_readable_store(tmp_path: Path, logs_json: Path) -> None:
    db = tmp_path / "incidents.db"
    env = {**os.environ, "DISTDOCTOR_DB": str(db)}
    for attempt in range(3):  # killed at three different moments
        proc = subprocess.Popen([sys.executable, "-c", WRITER, "node-1", "60", "-", str(logs_json)], env=env,
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        written = [proc.stdout.readline() for _ in range(20 + 37 * attempt)]  # it is writing now
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        last = int(written[-1])
        conn = sqlite3.connect(db)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
        with IncidentStore.open(db) as store:
            assert store.get(last) is not None  # every record it reported as written is there
            assert store.count() >= last
            store.add(store.get(last).__class__(time=time.time(), uid=f"after-kill-{attempt}"))
