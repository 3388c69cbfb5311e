"""stacks, pure parts: py-spy dumps recorded from real Gloo hangs (tests/fixtures/stacks/, made by
the job in train.py.txt there) read, classified, grouped; odd ranks, culprit and evidence; the
ptrace refusal explained from recorded /proc files; a stopped rank continued."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distdoctor.probes.base import ProbeContext
from distdoctor.probes.stacks import (
    analyse,
    as_evidence,
    classify,
    ensure_running,
    main_thread,
    merge_hosts,
    parse_json_dump,
    parse_text_dump,
    proc_state,
    rank_list,
)
from distdoctor.probes.stacks.discover import Job, RankProc, is_launcher
from distdoctor.probes.stacks.frames import DumpUnreadable
from distdoctor.probes.stacks.ptrace import explain_refusal, looks_denied

FIX = Path(__file__).parents[1] / "fixtures" / "stacks"


def recorded(kind: str, host: str = "node1", ranks: range = range(3)) -> list[dict]:
    out = []
    for r in ranks:
        text = (FIX / f"{kind}.rank{r}.json").read_text()
        pid = json.loads(text)[0]["pid"]
        out.append({"rank": str(r), "pid": pid, "host": host,
                    "frames": main_thread(parse_json_dump(text), pid).frames})
    return out


@pytest.mark.parametrize("kind, odd_where, cause", [
    ("collective", "broadcast (train.py:32)", "asymmetric-collective"),
    ("sleep", "slow_step (train.py:10)", "collective-timeout"),
    ("dataloader", "dataloader (train.py:40)", "collective-timeout"),
])
def test_recorded_hangs_name_the_odd_rank(kind: str, odd_where: str, cause: str) -> None:
    result = analyse(recorded(kind))
    majority = {"collective": "all_reduce (train.py:34)", "sleep": "all_reduce (train.py:38)",
                "dataloader": "all_reduce (train.py:41)"}[kind]
    assert [r["where"] for r in result["ranks"]] == [majority, odd_where, majority]
    assert [(o["rank"], o["where"]) for o in result["odd"]] == [("1", odd_where)]
    assert result["summary"] == f"2 ranks in {majority}; rank 1 in {odd_where}"
    assert [g["ranks"] for g in result["groups"]] == [["0", "2"], ["1"]]
    assert result["culprit"]["ranks"] == ["1"] and result["culprit"]["role"] == "stuck"
    evidence = as_evidence(result)
    assert evidence == [{"source": "stacks", "ranks": ["1"], "role": "stuck",
                         "why": result["culprit"]["why"], "cause": cause}]
    json.dumps(result)  # JSON-ready as it is


def test_dataloader_names_the_dataset_frame_inside() -> None:
    odd = analyse(recorded("dataloader"))["odd"][0]
    assert "Slow.__getitem__ (train.py:19)" in odd["why"]


def test_json_shape_is_the_issues() -> None:
    result = analyse(recorded("sleep"))
    assert set(result) >= {"ranks", "groups", "odd"}
    assert all(set(r) == {"rank", "pid", "host", "where", "frames"} for r in result["ranks"])
    assert all(set(g) == {"ranks", "where", "frames"} for g in result["groups"])
    assert all(set(o) == {"rank", "where", "why"} for o in result["odd"])


def test_silent_twin_every_rank_in_the_same_collective() -> None:
    ranks = recorded("sleep")
    ranks[1] = dict(ranks[1], frames=ranks[0]["frames"])
    result = analyse(ranks)
    assert result["odd"] == [] and result["culprit"] is None and as_evidence(result) == []
    assert result["summary"] == "3 ranks in all_reduce (train.py:38)"
    assert len(result["groups"]) == 1


def test_text_dump_reads_like_json() -> None:
    for kind in ("collective", "sleep", "dataloader"):
        text_frames = parse_text_dump((FIX / f"{kind}.rank1.txt").read_text())[0].frames
        json_frames = recorded(kind)[1]["frames"]
        assert classify(text_frames).where == classify(json_frames).where
        assert [f["name"] for f in text_frames] == [f["name"] for f in json_frames]


def test_native_frames_are_kept_but_not_grouped_on() -> None:
    text = (FIX / "collective.rank2.native.json").read_text()
    pid = json.loads(text)[0]["pid"]
    frames = main_thread(parse_json_dump(text), pid).frames
    assert any(f.get("native") for f in frames) and any(f["name"] == "c10d::Work::wait" for f in frames)
    assert classify(frames).where == "all_reduce (train.py:34)"
    ranks = recorded("collective")
    ranks[2] = dict(ranks[2], frames=frames)  # same Python stack as rank 0, plus native frames
    assert analyse(ranks)["groups"][0]["ranks"] == ["0", "2"]
    assert all(len(f["name"]) <= 200 for f in frames)


def test_bad_dumps_are_named() -> None:
    for bad in ("", "{", '{"a": 1}', "[1, 2]"):
        with pytest.raises(DumpUnreadable):
            parse_json_dump(bad)
    with pytest.raises(DumpUnreadable):
        parse_text_dump("Error: Failed to find python version from target process\n")


def _frames(*spec: tuple[str, str, int]) -> list[dict]:
    return [{"name": n, "file": f, "line": line} for n, f, line in spec]


SITE = "/venv/lib/python3.11/site-packages/"


@pytest.mark.parametrize("frames, where, kind", [
    (_frames(("monitored_barrier", SITE + "torch/distributed/distributed_c10d.py", 4000),
             ("main", "/job/train.py", 12)), "monitored_barrier (train.py:12)", "barrier"),
    (_frames(("all_gather", SITE + "torch/distributed/distributed_c10d.py", 3000),
             ("all_gather_object", SITE + "torch/distributed/distributed_c10d.py", 2900),
             ("log_metrics", "/job/metrics.py", 7)), "all_gather_object (metrics.py:7)", "collective"),
    (_frames(("_save", SITE + "torch/serialization.py", 900), ("save", SITE + "torch/serialization.py", 850),
             ("save_checkpoint", "/job/ckpt.py", 41), ("main", "/job/train.py", 90)),
     "save_checkpoint (ckpt.py:41)", "checkpoint"),
    (_frames(("_save", SITE + "torch/serialization.py", 900), ("save", SITE + "torch/serialization.py", 850),
             ("main", "/job/train.py", 90)), "torch.save (train.py:90)", "checkpoint"),
    (_frames(("forward", "/job/model.py", 20), ("evaluate", "/job/train.py", 70),
             ("main", "/job/train.py", 95)), "evaluate (train.py:70)", "eval"),
    (_frames(("all_reduce", SITE + "torch/distributed/distributed_c10d.py", 3252),
             ("evaluate", "/job/train.py", 72)), "all_reduce (train.py:72)", "collective"),
    (_frames(("backward", SITE + "torch/autograd/__init__.py", 300),
             ("backward", SITE + "torch/_tensor.py", 600), ("step", "/job/train.py", 60)),
     "backward (train.py:60)", "backward"),
    (_frames(("wait", "/usr/lib/python3.11/threading.py", 320), ("step", "/job/train.py", 50)),
     "step (train.py:50)", "python"),
    ([], "no Python frame", "python"),
])
def test_classify(frames: list[dict], where: str, kind: str) -> None:
    place = classify(frames)
    assert (place.where, place.kind) == (where, kind)


def test_ties_prefer_the_collective_and_two_collectives_give_no_culprit() -> None:
    ar = _frames(("all_reduce", SITE + "torch/distributed/distributed_c10d.py", 1), ("main", "/j/t.py", 5))
    sl = _frames(("step", "/j/t.py", 9), ("main", "/j/t.py", 6))
    bc = _frames(("broadcast", SITE + "torch/distributed/distributed_c10d.py", 2), ("main", "/j/t.py", 7))
    result = analyse([{"rank": "0", "pid": 1, "host": "h", "frames": sl},
                      {"rank": "1", "pid": 2, "host": "h", "frames": ar}])
    assert [o["rank"] for o in result["odd"]] == ["0"]
    assert result["culprit"]["ranks"] == ["0"]
    result = analyse([{"rank": "0", "pid": 1, "host": "h", "frames": ar},
                      {"rank": "1", "pid": 2, "host": "h", "frames": bc}])
    assert [o["rank"] for o in result["odd"]] == ["1"]  # named against rank 0's place...
    assert result["culprit"] is None and as_evidence(result) == []  # ...but it is a coin toss


def test_missing_rank_and_undumped_rank() -> None:
    ranks = recorded("sleep")
    ranks = [ranks[0], dict(ranks[2], error="process gone before it could be dumped")]
    result = analyse(ranks, expected=["0", "1", "2"])
    assert [(o["rank"], o["where"]) for o in result["odd"]] == [("1", "not running")]
    assert result["culprit"] == {"ranks": ["1"], "role": "missing",
                                 "why": "rank 1 is not running while the others wait"}
    assert result["ranks"][1]["where"] == "not dumped: process gone before it could be dumped"
    assert as_evidence(result)[0]["cause"] == "rank-crash-deadlock"
    assert result["summary"] == "rank 0 in all_reduce (train.py:38); rank 1 not running; rank 2 not dumped"


def test_rank0_in_checkpoint_is_rank0_overload() -> None:
    ranks = recorded("sleep")
    ck = _frames(("save_checkpoint", "/job/ckpt.py", 41), ("main", "/job/train.py", 90))
    ranks = [dict(ranks[0], frames=ck), dict(ranks[1], frames=ranks[0]["frames"]), ranks[2]]
    assert as_evidence(analyse(ranks))[0]["cause"] == "rank0-overload"


def test_merge_hosts_finds_the_odd_rank_across_nodes() -> None:
    a = analyse(recorded("sleep", "nodeA", range(0, 1)))
    b_ranks = recorded("sleep", "nodeB", range(1, 3))
    b = analyse(b_ranks)
    merged = merge_hosts([a, b])
    assert [(o["rank"], o["where"]) for o in merged["odd"]] == [("1", "slow_step (train.py:10)")]
    assert {r["host"] for r in merged["ranks"]} == {"nodeA", "nodeB"}


def test_rank_list_and_job_expected() -> None:
    assert rank_list(["0", "1", "2", "5", "7", "8", "x"]) == "0-2,5,7-8,x"
    job = Job("1", "torchrun agent 1", [RankProc(10, "0", "0", 3, 3), RankProc(11, "2", "2", 3, 3)])
    assert job.expected() == ["0", "1", "2"]
    job = Job("1", "x", [RankProc(10, "0", "0", 16, 8)])  # other ranks on other nodes
    assert job.expected() == []


def test_is_launcher() -> None:
    assert is_launcher(["/v/bin/python3", "/v/bin/torchrun", "--nproc-per-node", "2", "t.py"])
    assert is_launcher(["python", "-m", "torch.distributed.run", "t.py"])
    assert is_launcher(["python3.11", "-m", "torch.distributed.launch", "t.py"])
    assert not is_launcher(["timeout", "60", "python", "-m", "torch.distributed.run"])
    assert not is_launcher(["python", "train.py", "--note", "torchrun"])


# ---- ptrace refusals, from recorded /proc files --------------------------------------------------

def fake_proc(tmp_path: Path, cap_eff: str, scope: str | None, owner: int) -> ProbeContext:
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/status").write_text(f"Name:\tpython\nCapEff:\t{cap_eff}\n")
    (tmp_path / "proc/42").mkdir()
    (tmp_path / "proc/42/status").write_text(f"Name:\tpython\nUid:\t{owner}\t{owner}\t{owner}\t{owner}\n")
    if scope is not None:
        (tmp_path / "proc/sys/kernel/yama").mkdir(parents=True)
        (tmp_path / "proc/sys/kernel/yama/ptrace_scope").write_text(scope + "\n")
    return ProbeContext(root=tmp_path)


ALL_CAPS, NO_PTRACE, NO_CAPS = "000001fffeffffff", "000001fffef7ffff", "0000000000000000"


@pytest.mark.parametrize("cap, scope, owner, euid, expect", [
    (NO_PTRACE, "1", 0, 0, "container lacks the SYS_PTRACE capability"),
    (NO_CAPS, "0", 0, 1000, "process 42 belongs to user root (uid 0)"),
    (NO_CAPS, "1", 1000, 1000, "kernel.yama.ptrace_scope=1 lets a process attach only to its own children"),
    (NO_CAPS, "2", 1000, 1000, "kernel.yama.ptrace_scope=2 lets only root attach"),
    (ALL_CAPS, "3", 0, 0, "kernel.yama.ptrace_scope=3 forbids every attach"),
    (ALL_CAPS, None, 0, 0, "seccomp or AppArmor/SELinux"),
])
def test_ptrace_refusal_is_one_line_with_what_to_run(tmp_path: Path, cap: str, scope: str | None,
                                                     owner: int, euid: int, expect: str) -> None:
    line = explain_refusal(fake_proc(tmp_path, cap, scope, owner), 42, "distdoctor stacks --pid 42", euid)
    assert expect in line and "\n" not in line
    assert "`" in line  # something to run instead, copy-pasteable


def test_looks_denied_on_py_spy_messages() -> None:
    assert looks_denied("Permission Denied: Try running again with elevated permissions by going 'sudo env'")
    assert looks_denied("Error: Operation not permitted (os error 1)")
    assert not looks_denied("Error: Failed to find python version from target process")


# ---- a rank left stopped is continued ------------------------------------------------------------

def test_a_rank_left_stopped_is_continued_and_one_stopped_before_is_left(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ctx = ProbeContext()
    try:
        assert _state_soon(ctx, proc.pid, "S")
        proc.send_signal(signal.SIGSTOP)  # as if py-spy had been killed while attached
        assert _state_soon(ctx, proc.pid, "T")
        assert ensure_running(ctx, proc.pid, before="T") == ""  # stopped before: not ours to resume
        assert proc_state(ctx, proc.pid) == "T"
        assert "continued" in ensure_running(ctx, proc.pid, before="S")
        assert _state_soon(ctx, proc.pid, "S")
    finally:
        proc.kill()
        proc.wait()


def _state_soon(ctx: ProbeContext, pid: int, want: str, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc_state(ctx, pid) == want:
            return True
        time.sleep(0.02)
    return False


# ---- finding the ranks, from a recorded /proc tree ----------------------------------------------

def proc_tree(root: Path, procs: dict[int, tuple[int, list[str], dict[str, str] | None]]) -> ProbeContext:
    """pid -> (ppid, argv, environ or None for one that cannot be read) under root/proc."""
    for pid, (ppid, argv, env) in procs.items():
        d = root / "proc" / str(pid)
        d.mkdir(parents=True)
        (d / "stat").write_text(f"{pid} (x y) S {ppid} {pid} {pid} 0 -1\n")
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        if env is not None:
            (d / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()))
    return ProbeContext(root=root)


def test_find_jobs_on_a_recorded_proc_tree(tmp_path: Path) -> None:
    from distdoctor.probes.stacks import find_jobs

    rank = lambda r, **more: {"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2",  # noqa: E731
                              "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1",
                              "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none", **more}
    slurm = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0"}
    ctx = proc_tree(tmp_path, {
        1: (0, ["init"], {}),
        100: (1, ["/v/bin/python3", "/v/bin/torchrun", "--nproc-per-node=2", "train.py"], {}),
        101: (100, ["/v/bin/python", "-u", "train.py"], rank(0)),
        102: (100, ["/v/bin/python", "-u", "train.py"], rank(1)),
        103: (101, ["/v/bin/python", "-c", "from multiprocessing..."], rank(0)),  # DataLoader worker
        200: (1, ["slurmstepd: [77.0]"], slurm),
        201: (200, ["python", "train.py"], dict(slurm, SLURM_PROCID="0")),  # srun python train.py
        202: (200, ["python", "train.py"], dict(slurm, SLURM_PROCID="1")),
        300: (1, ["python", "-m", "torch.distributed.launch", "t.py"], {}),
        301: (300, ["python", "t.py"], None),  # another user's rank: environ unreadable
        400: (1, ["python", "serve.py"], {"PATH": "/bin"}),  # not a rank
    })
    jobs = {j.id: j for j in find_jobs(ctx, scope={})}
    assert sorted(jobs) == ["100", "300", "77.0"]
    assert [(r.pid, r.rank) for r in jobs["100"].ranks] == [(101, "0"), (102, "1")]
    assert jobs["100"].how == "torchrun agent 100" and jobs["100"].expected() == ["0", "1"]
    # the name every node knows the job by (the agent's pid is only this node's); not "none"
    assert jobs["100"].aliases == ["10.0.0.1:29500"] and jobs["100"].matches("10.0.0.1:29500")
    assert jobs["77.0"].aliases == ["77.0"]
    assert [(r.pid, r.rank) for r in jobs["77.0"].ranks] == [(201, "0"), (202, "1")]
    assert [(r.pid, r.rank) for r in jobs["300"].ranks] == [(301, "pid:301")]
    assert "301" in jobs["300"].ranks[0].env_error
    # inside Slurm job 77 (srun --overlap), only that job's processes count
    assert [j.id for j in find_jobs(ctx, scope={"SLURM_JOB_ID": "77"})] == ["77.0"]


def test_evidence_is_read_by_the_verdict_engine() -> None:
    from distdoctor.knowledge.verdict import culprit, rank_causes

    evidence = as_evidence(analyse(recorded("collective")))
    ranked = rank_causes(extra=evidence)
    assert ranked[0].id == "asymmetric-collective"
    assert culprit(None, evidence)["ranks"] == ["1"]
