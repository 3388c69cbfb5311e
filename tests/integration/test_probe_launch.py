"""Launch probe: rank variables of torchrun/Slurm/MPI environments, and a real process's environ."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.evaluate import evaluate
from distdoctor.probes.base import ProbeContext
from distdoctor.probes.launch import probe_launch

TORCHRUN = {"TORCHELASTIC_RUN_ID": "job1", "RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8",
            "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "0", "MASTER_ADDR": "node0", "MASTER_PORT": "29500",
            "TORCHELASTIC_ERROR_FILE": "/tmp/err.json", "PATH": "/usr/bin"}


def launch(env: dict[str, str]) -> dict:
    result = probe_launch(ProbeContext(env=env))
    assert result.status == "ok"
    return dict(result.facts)


def statuses(env: dict[str, str]) -> dict[str, str]:
    result = probe_launch(ProbeContext(env=env))
    return {f.check: f.status for f in evaluate(load_knowledge(use_env=False), {"launch": result})}


def test_consistent_torchrun_environment() -> None:
    facts = launch(TORCHRUN)
    assert (facts["launcher"], facts["rank"], facts["world_size"]) == ("torchrun", 3, 8)
    assert facts["rank_out_of_range"] is False and facts["local_rank_out_of_range"] is False
    assert "PATH" not in facts["variables"] and facts["variables"]["TORCHELASTIC_RUN_ID"] == "job1"
    assert set(statuses(TORCHRUN).values()) == {"ok"}


def test_nothing_set_is_not_a_job_and_gives_no_findings() -> None:
    facts = launch({"HOME": "/root"})
    assert (facts["launcher"], facts["in_job"]) == ("none", False)
    assert statuses({"HOME": "/root"}) == {}


@pytest.mark.parametrize("env,check", [
    ({**TORCHRUN, "RANK": "8"}, "rank-out-of-range"),
    ({**TORCHRUN, "LOCAL_RANK": "4"}, "local-rank-out-of-range"),
    ({**TORCHRUN, "MASTER_PORT": "29500x"}, "master-port-invalid"),
    ({**TORCHRUN, "WORLD_SIZE": "abc"}, "launch-env-malformed"),
    ({**TORCHRUN, "RANK": "-1"}, "launch-env-malformed"),
    ({**TORCHRUN, "LOCAL_WORLD_SIZE": "0"}, "launch-env-malformed"),
    # srun starts 2 tasks, each torchrun starts 4 workers: 8 is right; 16 is not
    ({**TORCHRUN, "WORLD_SIZE": "16", "RANK": "3", "SLURM_NTASKS": "2", "SLURM_PROCID": "0",
      "SLURM_STEP_ID": "0"}, "world-size-vs-scheduler"),
    # two launchers: 4 srun tasks per node, each a torchrun
    ({**TORCHRUN, "SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "4"}, "nested-launchers"),
    ({**TORCHRUN, "CUDA_VISIBLE_DEVICES": "0,1"}, "visible-gpus-vs-local-world-size"),
    ({**TORCHRUN, "CUDA_VISIBLE_DEVICES": ""}, "visible-gpus-vs-local-world-size"),
    ({"SLURM_PROCID": "2", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "4", "RANK": "1", "WORLD_SIZE": "4",
      "MASTER_ADDR": "n0", "MASTER_PORT": "1"}, "rank-vs-scheduler"),
])
def test_inconsistent_launch_environments_fail(env: dict[str, str], check: str) -> None:
    assert statuses(env)[check] == "fail"


def test_mpi_world_size_mismatch_names_the_variable() -> None:
    env = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "RANK": "0", "WORLD_SIZE": "8"}
    facts = launch(env)
    assert (facts["launcher"], facts["scheduler_tasks_var"]) == ("openmpi", "OMPI_COMM_WORLD_SIZE")
    assert facts["world_size_vs_scheduler"] is True
    finding = {f.check: f for f in evaluate(load_knowledge(use_env=False),
                                            {"launch": probe_launch(ProbeContext(env=env))})}
    assert finding["world-size-vs-scheduler"].title.startswith(
        "WORLD_SIZE=8 but the scheduler started 4 tasks (OMPI_COMM_WORLD_SIZE)")


@pytest.mark.parametrize("visible,count,short", [("0", 1, False), ("0,1,2,3", 4, False),
                                                 ("0,1,-1,3", 2, True), ("GPU-abc,GPU-def", 2, True)])
def test_visible_gpus_count_follows_cuda_rules(visible: str, count: int, short: bool) -> None:
    facts = launch({**TORCHRUN, "CUDA_VISIBLE_DEVICES": visible})
    assert (facts["visible_gpus"], facts["visible_gpus_short"]) == (count, short)


def test_malformed_rank_variables_are_named_and_an_empty_one_is_missing() -> None:
    # these once read "OK rank variables complete": non-numbers were simply not compared
    env = {"WORLD_SIZE": "abc", "RANK": "-1", "LOCAL_RANK": "xyz", "MASTER_ADDR": "",
           "MASTER_PORT": "29500"}
    facts = launch(env)
    assert facts["malformed_text"] == "RANK='-1', LOCAL_RANK='xyz', WORLD_SIZE='abc'"
    assert facts["missing_text"] == "MASTER_ADDR"
    found = statuses(env)
    assert found["launch-env-malformed"] == "fail" and found["launch-env-incomplete"] == "warn"
    assert "launch-env-malformed" not in statuses(TORCHRUN)


def test_partial_manual_environment_warns_with_missing_names() -> None:
    facts = launch({"MASTER_ADDR": "node0", "MASTER_PORT": "29500"})
    assert facts["launcher"] == "manual"
    assert facts["missing_text"] == "RANK, WORLD_SIZE"
    assert statuses({"MASTER_ADDR": "node0", "MASTER_PORT": "29500"})["launch-env-incomplete"] == "warn"


def test_recorded_proc_environ_is_read_for_pid(tmp_path: Path) -> None:
    (tmp_path / "proc/4242").mkdir(parents=True)
    record = b"".join(f"{k}={v}".encode() + b"\0" for k, v in {**TORCHRUN, "RANK": "9"}.items())
    (tmp_path / "proc/4242/environ").write_bytes(record)
    result = probe_launch(ProbeContext(root=tmp_path, pid=4242, env={"RANK": "0"}))
    assert result.facts["source"] == "/proc/4242/environ"
    assert (result.facts["rank"], result.facts["rank_out_of_range"]) == (9, True)


def test_unreadable_pid_is_unavailable(tmp_path: Path) -> None:
    result = probe_launch(ProbeContext(root=tmp_path, pid=4242))
    assert result.status == "unavailable"
    assert "no process 4242" in result.reason


def test_real_running_process_environment() -> None:
    env = {**TORCHRUN, "RANK": "2", "PATH": os.environ.get("PATH", "/usr/bin")}
    proc = subprocess.Popen([sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"],
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    # /proc/PID/environ holds the parent's environment until the child has exec'd: wait for it
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    try:
        result = probe_launch(ProbeContext(pid=proc.pid, env={}))
    finally:
        proc.communicate(b"", timeout=30)
    if result.status == "unavailable" and "permission denied" in result.reason:
        pytest.skip(result.reason)
    assert result.facts["source"] == f"/proc/{proc.pid}/environ"
    assert (result.facts["launcher"], result.facts["rank"]) == ("torchrun", 2)
