"""A GPU topology pasted with a hang's log (issue 21: context pasted with the log): read from the
log files by `distdoctor logs`, kept with the logs' result, weighed by the one diagnosis as a fact."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from distdoctor.probes.topology_paste import MAX_FILE, pasted_topology
from distdoctor.tui.cli import main

TIMEOUT = ("[rank0]:[E1202 10:00:00.000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
           "timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran "
           "for 600013 milliseconds before timing out.\n")
# nvidia-smi topo -m's layout, two GPUs of two sockets joined through the SMP interconnect
MATRIX = ("        GPU0    GPU1    CPU Affinity    NUMA Affinity\n"
          "GPU0     X      {link}     0-31            0\n"
          "GPU1    {link}      X      32-63           1\n\n"
          "Legend:\n\n  X    = Self\n")


def _logs(tmp_path: Path, *, link: str | None, symptom: str = "hang") -> None:
    log = tmp_path / "rank0.log"
    log.write_text(TIMEOUT + (f"$ nvidia-smi topo -m\n{MATRIX.format(link=link)}" if link else ""))
    main(["logs", str(log), "--symptom", symptom, "--json"])


def _p2p(capsys: pytest.CaptureFixture[str]) -> tuple[dict | None, dict]:
    data = json.loads(capsys.readouterr().out)
    return next((c for c in data["causes"] if c["id"] == "p2p-unsupported"), None), data


def test_gpus_joined_only_through_the_host_weigh_p2p_in_a_hang_as_a_fact(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    _logs(tmp_path, link="SYS")
    cause, data = _p2p(capsys)
    assert cause is not None and cause["basis"] == "facts"
    assert data["verdict"]["confidence"] == "unknown"  # a fact of the set-up never makes an answer


@pytest.mark.parametrize("link, symptom", [("NV4", "hang"), (None, "hang"), ("SYS", "error")],
                         ids=["nvlink", "no-matrix", "not-a-hang"])
def test_silent_twins_nvlink_no_matrix_or_another_symptom(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         link: str | None, symptom: str) -> None:
    _logs(tmp_path, link=link, symptom=symptom)
    cause, _ = _p2p(capsys)
    assert cause is None or cause["basis"] != "facts"


def test_only_small_files_with_a_mark_are_read_again(tmp_path: Path) -> None:
    (tmp_path / "big.log").write_text("GPU0 " * (MAX_FILE // 5 + 1))
    (tmp_path / "plain.log").write_text(TIMEOUT)
    assert pasted_topology([str(tmp_path), "-", str(tmp_path / "missing")]) is None
    (tmp_path / "topo.txt").write_text(MATRIX.format(link="PHB"))
    facts = pasted_topology([str(tmp_path)])
    assert facts is not None and [p["link"] for p in facts["pairs"]] == ["PHB"]
