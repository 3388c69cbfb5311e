"""Structure across ranks: crashed rank vs straggler vs asymmetric paths, and facts that disagree."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.logs import analyse, analyse_text

KB = load_knowledge(use_env=False)
WORLD = 8


def nccl_init(rank: int, host: str, version: str = "2.21.5", ifname: str = "eth0",
              net: str = "IB") -> list[str]:
    p = f"{host}:{4000 + rank}:{4000 + rank} [{rank % 4}]"
    ip = f"10.0.{rank // 4}.{rank % 4 + 10}"
    lines = [f"{p} NCCL INFO Bootstrap : Using {ifname}:{ip}<0>",
             f"{p} NCCL INFO cudaDriverVersion 12040",
             f"{p} NCCL INFO NCCL version {version}+cuda12.4"]
    if net == "IB":
        lines.append(f"{p} NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB {ifname}:{ip}<0>")
    else:
        lines += [f"{p} NCCL INFO NET/IB : No device found.", f"{p} NCCL INFO NET/Socket : Using [0]{ifname}:{ip}<0>"]
    lines += [f"{p} NCCL INFO Using network {net if net == 'IB' else 'Socket'}",
              f"{p} NCCL INFO ncclCommInitRank comm 0x55aa rank {rank} nranks {WORLD} cudaDev {rank % 4} "
              f"nvmlDev {rank % 4} busId 1000 commId 0x77 - Init START",
              f"{p} NCCL INFO Channel 00/0 : {rank}[{rank % 4}] -> {(rank + 1) % WORLD}[{(rank + 1) % 4}] via P2P/IPC",
              f"{p} NCCL INFO ncclCommInitRank comm 0x55aa rank {rank} nranks {WORLD} cudaDev {rank % 4} "
              f"nvmlDev {rank % 4} busId 1000 commId 0x77 - Init COMPLETE"]
    return lines


def progress(rank: int, steps: range) -> list[str]:
    return [f"[rank{rank}]:[titan] 2026-11-29 10:00:{s % 60:02d},000 - root - INFO - step: {s}  loss: "
            f"{2 + rank / 10 + s / 1000:.4f}" for s in steps]


def watchdog(rank: int, seq: int, op: str = "ALLREDUCE") -> list[str]:
    return [f"[rank{rank}]:[E1129 10:40:00.{rank:03d}000000 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID "
            f"0(default_pg) Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
            f"OpType={op}, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600031 milliseconds "
            "before timing out.",
            f"[rank{rank}]:[E1129 10:40:00.{rank:03d}100000 ProcessGroupNCCL.cpp:627] [Rank {rank}] To avoid "
            "data inconsistency, we are taking the entire process down."]


def oom(rank: int) -> list[str]:
    return [f"[rank{rank}]:Traceback (most recent call last):",
            f'[rank{rank}]:  File "/work/train.py", line 88, in step',
            f"[rank{rank}]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {rank % 4} "
            "has a total capacity of 79.10 GiB of which 120.00 MiB is free."]


def write_ranks(tmp: Path, per_rank: dict[int, list[str]], name: str = "rank{}.log") -> Path:
    d = tmp / "logs"
    d.mkdir(exist_ok=True)
    for r, lines in per_rank.items():
        (d / name.format(r)).write_text("\n".join(lines) + "\n")
    return d


def base(rank: int, **kw) -> list[str]:
    return nccl_init(rank, f"node{rank // 4}", **kw) + progress(rank, range(1, 30))


def ids(report) -> list[str]:
    return [c.id for c in report.causes]


def test_crashed_rank_with_others_waiting_is_a_deadlock(tmp_path: Path) -> None:
    logs = {r: base(r) + (oom(r) if r == 5 else watchdog(r, 57)) for r in range(WORLD)}
    rep = analyse([str(write_ranks(tmp_path, logs))], KB)
    assert ids(rep)[0] == "rank-crash-deadlock"
    assert "cuda-oom" in ids(rep)[:3]
    assert rep.first_failure is not None and rep.first_failure.rank == "5"
    assert "OutOfMemoryError" in rep.first_failure.text
    assert rep.ranks["5"]["status"] == "crashed"
    assert {rep.ranks[str(r)]["status"] for r in range(WORLD) if r != 5} == {"timeout"}
    assert rep.ranks["0"]["last_collective"] == {"seq": 57, "op": "ALLREDUCE", "pg": "0"}
    assert rep.facts["collectives"]["crashed"] == "5"


def test_straggler_without_a_crash_is_a_collective_timeout(tmp_path: Path) -> None:
    logs = {r: base(r) + ([] if r == 3 else watchdog(r, 57)) for r in range(WORLD)}
    rep = analyse([str(write_ranks(tmp_path, logs))], KB)
    assert ids(rep)[0] == "collective-timeout"
    assert "rank-crash-deadlock" not in ids(rep)
    assert rep.ranks["3"]["status"] == "not waiting"
    assert rep.facts["collectives"]["not_waiting"] == "3"
    # named from a failure line that is missing (no line shows rank 3 alive): an inference (DL906)
    assert rep.culprit == {"ranks": ["3"], "role": "stuck", "why": rep.culprit["why"], "inferred": True}
    assert "rank 3 never reached" in rep.summary.lower()


def test_rank0_straggler_points_at_rank0_overload(tmp_path: Path) -> None:
    logs = {r: base(r) + ([] if r == 0 else watchdog(r, 57, "BROADCAST")) for r in range(WORLD)}
    rep = analyse([str(write_ranks(tmp_path, logs))], KB, symptom="hang")
    assert set(ids(rep)[:2]) == {"rank0-overload", "collective-timeout"}
    assert rep.culprit is not None and rep.culprit["ranks"] == ["0"] and rep.culprit["role"] == "stuck"


def test_different_seqnums_are_asymmetric_collectives(tmp_path: Path) -> None:
    logs = {r: base(r) + watchdog(r, 57 if r < 4 else 58) for r in range(WORLD)}
    rep = analyse([str(write_ranks(tmp_path, logs))], KB)
    assert ids(rep)[0] == "asymmetric-collective"
    assert rep.ranks["0"]["position"] == "behind" and rep.ranks["7"]["position"] == "ahead"
    assert any("different SeqNums" in r for r in rep.causes[0].reasons)


def test_different_optypes_at_one_seqnum_are_asymmetric(tmp_path: Path) -> None:
    logs = {r: base(r) + watchdog(r, 57, "ALLREDUCE" if r % 2 else "BROADCAST") for r in range(WORLD)}
    rep = analyse([str(write_ranks(tmp_path, logs))], KB)
    assert ids(rep)[0] == "asymmetric-collective"


def test_nccl_version_disagreement(tmp_path: Path) -> None:
    logs = {r: base(r, version="2.21.5" if r < 4 else "2.18.1") for r in range(WORLD)}
    rep = analyse([str(write_ranks(tmp_path, logs))], KB)
    assert ids(rep)[0] == "version-mismatch"
    assert "nccl_version" in rep.facts["disagree"]
    assert rep.facts["values"]["nccl_version"] == {"2.21.5": "0-3", "2.18.1": "4-7"}
    assert rep.facts["by_rank"]["6"]["nccl_version"] == "2.18.1"
    assert {e.rank for e in rep.causes[0].evidence} >= {"0", "4"}


def test_interface_disagreement_across_nodes_is_nic_selection(tmp_path: Path) -> None:
    logs = {r: base(r, ifname="eth0" if r < 4 else "docker0") for r in range(WORLD)}
    rep = analyse([str(write_ranks(tmp_path, logs))], KB)
    assert ids(rep)[0] == "nic-selection"
    assert "bootstrap_if" in rep.facts["disagree"]


def test_some_ranks_on_sockets_is_an_ib_failure(tmp_path: Path) -> None:
    logs = {r: base(r, net="IB" if r != 6 else "Socket") for r in range(WORLD)}
    rep = analyse([str(write_ranks(tmp_path, logs))], KB)
    assert ids(rep)[0] == "ib-rdma-failure"
    assert rep.facts["by_rank"]["6"]["network"] == "Socket"


def test_interleaved_single_file_with_rank_prefixes(tmp_path: Path) -> None:
    per = {r: base(r) + (oom(r) if r == 2 else watchdog(r, 9)) for r in range(WORLD)}
    lines = [ln for i in range(max(map(len, per.values()))) for r in range(WORLD) if i < len(per[r])
             for ln in [per[r][i]]]
    rep = analyse_text("\n".join(lines) + "\n", KB, name="job.out")
    assert ids(rep)[0] == "rank-crash-deadlock"
    assert rep.first_failure and rep.first_failure.rank == "2"
    assert rep.ranks["2"]["status"] == "crashed"
    # NCCL lines carry host:pid, mapped to ranks through their ncclCommInitRank lines
    assert rep.facts["by_rank"]["3"]["channels"] == ["P2P"]
    assert rep.facts["world_size"] == WORLD


def test_first_failure_follows_timestamps_across_files(tmp_path: Path) -> None:
    a = ["2026-11-29 10:05:00,000 ERROR [rank1]: RuntimeError: CUDA error: an illegal memory access was encountered"]
    b = ["2026-11-29 10:01:00,000 ERROR [rank6]: torch.OutOfMemoryError: CUDA out of memory."]
    rep = analyse([str(write_ranks(tmp_path, {1: a, 6: b}))], KB)
    assert rep.first_failure is not None and rep.first_failure.rank == "6"


def test_slurm_task_files_give_the_rank(tmp_path: Path) -> None:
    logs = {r: ["starting"] + (oom(r)[2:] if r == 3 else ["ok"]) for r in range(4)}
    d = write_ranks(tmp_path, {r: [ln.replace(f"[rank{r}]:", "") for ln in v] for r, v in logs.items()},
                    name="slurm-881-task-{}.out")
    rep = analyse([str(d)], KB)
    assert rep.first_failure and rep.first_failure.rank == "3"


def test_torchelastic_summary_and_error_file(tmp_path: Path) -> None:
    summary = ["train.py FAILED", "-" * 40, "Failures:", "  <NO_OTHER_FAILURES>", "-" * 40,
               "Root Cause (first observed failure):", "[0]:", "  time      : 2026-11-29_10:00:00",
               "  host      : node7", "  rank      : 13 (local_rank: 5)", "  exitcode  : -9 (pid: 4242)",
               "  error_file: <N/A>", "  traceback : Signal 9 (SIGKILL) received by PID 4242"]
    (tmp_path / "launcher.log").write_text("\n".join(summary) + "\n")
    rep = analyse([str(tmp_path / "launcher.log")], KB, symptom="error")
    # a bare SIGKILL is a kill, not a guessed out-of-memory: host memory only from the killer's own line
    assert ids(rep)[0] == "rank-crash-deadlock" and "other" not in ids(rep)
    assert rep.ranks["13"]["exitcode"] == -9
    err = tmp_path / "attempt_0" / "2" / "error.json"
    err.parent.mkdir(parents=True)
    err.write_text(json.dumps({"message": {"message": "RuntimeError: CUDA error: invalid device ordinal",
                                           "extraInfo": {"py_callstack": "Traceback (most recent call last):\n"
                                                         "  File \"t.py\", line 3\nRuntimeError: x",
                                                         "timestamp": "1764400000"}}}))
    rep = analyse([str(err)], KB)
    assert ids(rep)[0] == "rank-env-mismatch"
    assert rep.first_failure and rep.first_failure.rank == "2"


@pytest.mark.parametrize("symptom,lead", [("hang", "rank-crash-deadlock"), ("error", "cuda-oom"),
                                          (None, "cuda-oom")])
def test_symptom_shifts_the_ranking(symptom: str | None, lead: str) -> None:
    text = "[10] include/alloc.h:58 NCCL WARN Cuda failure 'out of memory'\n[10] NCCL INFO init.cc:792 -> 1\n"
    assert ids(analyse_text(text, KB, symptom=symptom))[0] == lead


def test_ranks_at_different_step_counts_when_the_log_stops(tmp_path: Path) -> None:
    logs = {0: base(0)[:-3], 1: base(1)}  # rank 0 stopped three steps earlier
    rep = analyse([str(write_ranks(tmp_path, logs))], KB, symptom="hang")
    assert ids(rep)[0] == "asymmetric-collective"
    assert any("step 26" in r and "step 29" in r for r in rep.causes[0].reasons)


def test_training_end_then_timeout_is_asymmetric() -> None:
    text = "`Trainer.fit` stopped: `max_epochs=3` reached.\n" + "\n".join(watchdog(0, 411)) + "\n"
    rep = analyse_text(text, KB, symptom="hang")
    assert ids(rep)[0] == "asymmetric-collective"


def test_duplicate_ranks_under_a_launcher() -> None:
    text = "\n".join(["Setting OMP_NUM_THREADS environment variable for each process to be 1 in default",
                      "| distributed init (rank 0): env://", "| distributed init (rank 1): env://",
                      "| distributed init (rank 0): env://"]) + "\n"
    rep = analyse_text(text, KB)
    assert set(ids(rep)[:2]) == {"mixed-launchers", "rank-env-mismatch"}


def test_traceback_collectives_that_differ() -> None:
    text = "\n".join([
        '  File "/env/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2619, in all_reduce',
        "    work = group.allreduce([tensor], opts)",
        '  File "/env/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 4159, in barrier',
        "    torch.distributed.barrier(group=group)"]) + "\n"
    assert ids(analyse_text(text, KB))[0] == "asymmetric-collective"


def test_workers_give_the_same_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = {r: base(r, version="2.21.5" if r else "2.20.3") + (oom(r) if r == 5 else watchdog(r, 57))
            for r in range(WORLD)}
    d = write_ranks(tmp_path, logs)
    monkeypatch.setenv("DISTDOCTOR_LOG_WORKERS", "1")
    one = analyse([str(d)], KB).to_dict()
    monkeypatch.setenv("DISTDOCTOR_LOG_WORKERS", "2")
    two = analyse([str(d)], KB).to_dict()
    assert one == two
    assert one["causes"][0]["id"] == "rank-crash-deadlock"
