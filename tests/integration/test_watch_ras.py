"""NCCL RAS over time with a stand-in `ncclras` on PATH that replays real NCCL 2.28.9 outputs
(tests/fixtures/ras/over-time): the malformed JSON of 2.28.9 repaired, a mismatch counted only when
the counts stay apart with nothing moving across the window, moving counts taken as progress by
the watcher even when every rank sits idle, and a confirmed mismatch in the hang's evidence."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from distdoctor.probes import ras
from distdoctor.probes.watch.rasover import RasOverTime, RasPoller

HERE = Path(__file__).parents[1] / "fixtures" / "ras" / "over-time"
SKEW = HERE / "nccl-2.28.9-multi-comm-skew.json"
MOVING = HERE / "derived-multi-comm-moving.json"
MALFORMED = HERE / "nccl-2.28.9-unresponsive-malformed.json"

STAND_IN = r'''#!{python}
"""ncclras stand-in: prints the next file of $DD_RAS_FILES (the last one again once past the end);
with $DD_RAS_STEP, every AllReduce count grows by that much per call."""
import json, os, sys
if "--version" in sys.argv:
    sys.stderr.write("NCCL RAS client version 2.28.9\n")
    sys.exit(0)
state = os.path.join(os.environ["DD_RAS_STATE"], "calls")
n = int(open(state).read()) if os.path.exists(state) else 0
open(state, "w").write(str(n + 1))
files = os.environ["DD_RAS_FILES"].split(os.pathsep)
text = open(files[min(n, len(files) - 1)]).read()
step = int(os.environ.get("DD_RAS_STEP", "0"))
if step:
    doc = json.loads(text)
    for comm in doc["communicators"]:
        for r in comm["ranks"]:
            r["collective_counts"]["AllReduce"] += n * step
    text = json.dumps(doc, indent=2)
sys.stdout.write(text)
'''


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    exe = folder / "ncclras"
    exe.write_text(STAND_IN.format(python=sys.executable))
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DD_RAS_STATE", str(tmp_path))

    def replay(*files: Path, step: int = 0) -> None:
        monkeypatch.setenv("DD_RAS_FILES", os.pathsep.join(map(str, files)))
        monkeypatch.setenv("DD_RAS_STEP", str(step))
        (tmp_path / "calls").unlink(missing_ok=True)
    return replay


def test_the_missing_comma_of_nccl_2_28_9_is_put_back() -> None:
    text = MALFORMED.read_text()
    with pytest.raises(ValueError):
        __import__("json").loads(text)
    facts = ras.parse(text)
    assert [w["rank"] for w in facts["unresponsive"]] == ["1"] and facts["unresponsive"][0]["pid"] == 10017
    assert ras.as_evidence(facts)[0]["ranks"] == ["1"]


def test_a_mismatch_counts_only_when_it_holds_with_nothing_moving_across_the_window() -> None:
    stuck, moving = RasOverTime(10.0), RasOverTime(10.0)
    for at in (0.0, 5.0, 10.0):
        stuck.add(at, SKEW.read_text())
    assert stuck.confirmed(5.0) == []  # half a window: one snapshot's skew is not a hang
    assert [(m["comm"], m["counts"]) for m in stuck.confirmed(10.0)] == [("0x4e0104c2022fa2f9", {"0": "10", "1": "3"})]
    moving.add(0.0, SKEW.read_text())
    assert moving.add(5.0, MOVING.read_text())  # counts moved: progress
    moving.add(10.0, MOVING.read_text())
    assert moving.confirmed(10.0) == [] and moving.last_progress == 5.0


def test_the_poller_asks_the_stand_in_again_and_again(stand_in) -> None:
    stand_in(SKEW)
    poller = RasPoller(window_s=0.6, every_s=0.2)
    assert poller.available
    poller.start()
    time.sleep(1.5)
    poller.stop()
    poller.ask()  # as the capture does: the state now, after the window's answers
    facts = poller.facts()
    assert facts["answers"] >= 3
    assert [m["comm"] for m in facts["mismatches"]] == ["0x4e0104c2022fa2f9"]
    assert any(item["source"] == "ras" for item in facts["evidence"])


def _idle_ranks(n: int = 2) -> list[subprocess.Popen]:
    procs = []
    for rank in range(n):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n))
        procs.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=env))
    return procs


@pytest.mark.slow
def test_moving_ras_counts_keep_idle_ranks_from_a_hang_and_frozen_ones_confirm_it(stand_in, tmp_path: Path) -> None:
    from distdoctor.probes.watch import WatchConfig, watch_job
    from distdoctor.probes.watch.targets import Running, by_pids

    procs = _idle_ranks()
    try:
        stand_in(SKEW, step=3)  # every answer, every count a little further
        cancel = threading.Event()
        timer = threading.Timer(9.0, cancel.set)
        timer.start()
        moving = watch_job(Running(by_pids([p.pid for p in procs])),
                           WatchConfig(stall_s=3, evidence=tmp_path / "moving", native=False, cancel=cancel))
        timer.cancel()
        assert moving.outcome != "hang" and moving.hang is None
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
    procs = _idle_ranks()
    try:
        stand_in(SKEW)
        frozen = watch_job(Running(by_pids([p.pid for p in procs])),
                           WatchConfig(stall_s=3, evidence=tmp_path / "frozen", native=False))
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
    assert frozen.outcome == "hang"
    assert frozen.capture["ras"]["mismatches"] and frozen.capture["ras"]["answers"] >= 2
    assert Path(frozen.evidence["ras"]).is_file()
    assert any(r.startswith("ras: ") for c in frozen.causes for r in c["reasons"])
