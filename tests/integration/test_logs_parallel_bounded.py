"""Scan workers run only a few batches ahead of the process that reads their results (issue 25,
item 15): on 4096 rank files the results that piled up while the collector was fed (each holds
a file's 32 KiB tail) were most of the 345 MiB peak. Real spawned workers, real files."""
from __future__ import annotations

from pathlib import Path

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.logs import analyse, parallel
from distdoctor.knowledge.logs.compiled import kb_key
from distdoctor.knowledge.logs.sources import expand

KB = load_knowledge(use_env=False)


def _files(root: Path, n: int) -> Path:
    for r in range(n):
        lines = [f"[rank{r}]:[titan] 2026-11-29 10:00:{s % 60:02d},000 - root - INFO - step: {s}  loss: 2.{s:04d}"
                 for s in range(200)]
        lines.append(f"[rank{r}]:torch.OutOfMemoryError: CUDA out of memory." if r == 7 else
                     f"[rank{r}]:[E1129 10:40:00.0 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) "
                     f"Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE)")
        (root / f"rank{r}.log").write_text("\n".join(lines) + "\n")
    return root


def test_batches_in_flight_stay_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "BATCH_FILES", 16)  # 19 batches
    sources, _skipped = expand([str(_files(tmp_path, 300))])
    tasks = parallel.plain_ranges(sources)
    submitted, taken, most = [0], [0], [0]
    submit = parallel._submit

    def counting(*args):
        submitted[0] += 1
        most[0] = max(most[0], submitted[0] - taken[0])
        return submit(*args)

    monkeypatch.setattr(parallel, "_submit", counting)
    seen = []
    for i, _a, res in parallel.scan_all(kb_key(KB), sources, tasks, 2):
        assert not isinstance(res, BaseException)
        seen.append(i)
        if len(seen) % parallel.BATCH_FILES == 0:
            taken[0] += 1
    assert seen == list(range(300))  # every file, in order
    assert submitted[0] == -(-300 // parallel.BATCH_FILES)
    assert most[0] <= 2 * parallel.AHEAD + 1


def test_many_small_files_give_the_same_report_with_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _files(tmp_path, 300)
    monkeypatch.setenv("DISTDOCTOR_LOG_WORKERS", "1")
    one = analyse([str(d)], KB).to_dict()
    monkeypatch.setenv("DISTDOCTOR_LOG_WORKERS", "2")
    assert analyse([str(d)], KB).to_dict() == one
    assert one["files_read"] == 300
