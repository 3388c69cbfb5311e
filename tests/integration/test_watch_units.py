"""The watcher's judgement and launch plan without a job: progress replayed from recorded
samples (pure), the launch line and evidence switches, and the commands' usage errors."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from distdoctor.probes.watch.launch import evidence_env, launcher_of, plan_launch
from distdoctor.probes.watch.progress import Progress, rank_of_log, shared_and_ranked

C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def frame(name: str, file: str = "train.py", line: int = 1) -> dict:
    return {"name": name, "file": file, "line": line}


IN_ALL_REDUCE = [frame("all_reduce", C10D, 2800), frame("step", "train.py", 30), frame("<module>", "train.py", 40)]
IN_FORWARD = [frame("forward", "model.py", 12), frame("step", "train.py", 28), frame("<module>", "train.py", 40)]
IN_LOOP = [frame("spin", "train.py", 9), frame("<module>", "train.py", 40)]


def two_ranks(stall: float = 10.0) -> Progress:
    p = Progress(stall, start=0.0, host="h")
    p.add_rank("0", 100, 0.0)
    p.add_rank("1", 101, 0.0)
    return p


def test_idle_ranks_with_nothing_new_are_a_hang_after_the_stall_window_exactly() -> None:
    p = two_ranks()
    for t in range(0, 10):
        p.cpu("0", float(t), 1.0)
        p.cpu("1", float(t), 1.0)
        if p.wants_stacks(float(t), 2.0):  # idle ranks are sampled too, every 2 s
            p.stacks(float(t), {"0": IN_ALL_REDUCE, "1": IN_LOOP})  # the same place every time
        assert not p.stalled(float(t))
    assert p.stalled(10.0) and p.rounds == 4


def test_a_growing_log_is_progress_for_its_rank_and_for_the_job() -> None:
    p = two_ranks()
    p.log_size("1", 0.0, 100)
    p.log_size("1", 8.0, 180)
    assert not p.stalled(12.0) and p.stalled(18.0)
    p.log_size(None, 1.0, 10)
    p.log_size(None, 17.0, 20)  # the shared output grew
    assert not p.stalled(18.0)


def test_busy_ranks_whose_stacks_change_progress_and_a_busy_loop_in_one_frame_does_not() -> None:
    healthy, spinning = two_ranks(), two_ranks()
    for t in range(0, 30, 2):
        for p in (healthy, spinning):
            p.cpu("0", float(t), t * 0.9)
            p.cpu("1", float(t), t * 0.9)
        assert healthy.wants_stacks(float(t), 2.0) or t == 0
        assert spinning.wants_stacks(float(t), 2.0) or t == 0
        stacks = IN_ALL_REDUCE if t % 4 else IN_FORWARD
        healthy.stacks(float(t), {"0": stacks, "1": stacks})
        spinning.stacks(float(t), {"0": IN_LOOP, "1": IN_ALL_REDUCE})
    assert not healthy.stalled(28.0)
    assert spinning.stalled(28.0)  # busy, but in the same frames for the whole window
    states = {r.rank: r.state for r in spinning.rows(28.0)}
    assert states == {"0": "stuck in a frame", "1": "in a collective"}


def test_bytes_moved_by_the_collective_threads_are_progress_whatever_the_stacks_say() -> None:
    straggling = two_ranks()
    for t in range(0, 30, 2):  # rank 0 waits in all_reduce, rank 1 sleeps: every sample alike
        straggling.stacks(float(t), {"0": IN_ALL_REDUCE, "1": IN_LOOP})
        straggling.collective_io("0", float(t), 1000 * t)  # yet the all_reduces complete
        straggling.collective_io("1", float(t), 1000 * t)
    assert not straggling.stalled(28.0)
    straggling.collective_io("0", 40.0, 28000)  # flat from here on: nothing completes
    assert straggling.stalled(38.0)


def test_a_rank_outside_the_collectives_moving_bytes_progresses_and_a_waiting_ones_chatter_does_not() -> None:
    saving, chatting = two_ranks(), two_ranks()
    SAVE = [frame("save", "torch/serialization.py", 10), frame("<module>", "train.py", 50)]
    for t in range(0, 30, 2):  # rank 0 in one long save call, rank 1 waiting in all_reduce
        saving.stacks(float(t), {"0": SAVE, "1": IN_ALL_REDUCE})
        saving.process_io("0", float(t), 10_000_000 * t)  # the checkpoint being written
        chatting.stacks(float(t), {"0": IN_ALL_REDUCE, "1": IN_LOOP})
        chatting.process_io("0", float(t), 500 * t)  # a metrics thread of a rank that waits
    assert not saving.stalled(28.0)
    assert chatting.stalled(28.0)


def test_a_busy_rank_on_one_python_line_progresses_when_it_is_inside_named_native_code() -> None:
    MATMUL = [frame("evaluate", "train.py", 5), frame("<module>", "train.py", 9)]
    sgemm = [{"name": "mkl_blas_sgemm", "file": "libtorch_cpu.so", "line": 0, "native": True}] + MATMUL
    tanh = [{"name": "at::native::tanh_kernel", "file": "libtorch_cpu.so", "line": 0, "native": True}] + MATMUL
    spin = [{"name": "0x7f9aaac4524a", "file": "libc.so.6", "line": 0, "native": True}] + IN_LOOP
    working, spinning = two_ranks(), two_ranks()
    for t in range(0, 30, 2):
        for p in (working, spinning):
            p.cpu("0", float(t), t * 1.0)
        working.stacks(float(t), {"0": MATMUL, "1": IN_ALL_REDUCE})
        spinning.stacks(float(t), {"0": IN_LOOP, "1": IN_ALL_REDUCE})
        if t >= 4:  # in doubt: the same line for a round, nothing else moved for 2 s
            assert working.needs_native(float(t), 2.0) == ["0"] or working.ranks["0"].last_progress == t - 2
        if "0" in working.needs_native(float(t), 2.0):
            working.native("0", float(t), sgemm if t < 20 else tanh)  # one kernel for most of the window
        if "0" in spinning.needs_native(float(t), 2.0):
            spinning.native("0", float(t), spin)
    assert not working.stalled(28.0)
    assert spinning.stalled(28.0)


def test_a_rank_that_died_is_named_first_among_the_failures() -> None:
    p = two_ranks()
    p.died("1", 3.0, 1)
    p.died("0", 3.5, -15)
    assert p.failed_ranks() == ["1", "0"]
    unread = two_ranks()
    unread.died("0", 1.0, None)  # reaped before its status could be read: not a failure by itself
    unread.died("1", 1.0, 0)
    assert unread.failed_ranks() == []
    assert {r.rank: r.state for r in p.rows(4.0)} == {"0": "dead", "1": "dead"}


def test_a_rank_the_others_wait_for_is_a_straggler_and_a_balanced_job_has_none() -> None:
    slow, even = two_ranks(), two_ranks()
    for n in range(8):
        slow.stacks(float(n), {"0": IN_ALL_REDUCE, "1": IN_FORWARD if n % 4 else IN_ALL_REDUCE})
        even.stacks(float(n), {"0": IN_FORWARD if n % 2 else IN_ALL_REDUCE,
                               "1": IN_ALL_REDUCE if n % 2 else IN_FORWARD})
    assert slow.stragglers() == [{"rank": "1", "slowdown": None}]
    assert even.stragglers() == []


def test_torchrun_log_files_belong_to_their_local_rank() -> None:
    assert rank_of_log("/e/rank-logs/none_x/attempt_0/3/stderr.log") == "3"
    assert rank_of_log("/e/launcher.log") is None
    shared, ranked = shared_and_ranked(["/e/launcher.log", "/e/r/a_1/attempt_2/0/stdout.log"])
    assert shared == ["/e/launcher.log"] and ranked == {"0": ["/e/r/a_1/attempt_2/0/stdout.log"]}


def test_torchrun_gets_a_per_rank_log_folder_only_when_it_has_none(tmp_path: Path) -> None:
    plan = plan_launch(["torchrun", "--nproc-per-node", "2", "train.py", "--lr", "1"], {}, tmp_path, knobs=False)
    assert plan.argv == ["torchrun", "--log-dir", str(tmp_path / "rank-logs"), "--redirects", "3", "--tee", "3",
                         "--nproc-per-node", "2", "train.py", "--lr", "1"]
    mine = ["python", "-m", "torch.distributed.run", "--log-dir=/x/logs", "train.py"]
    plan = plan_launch(mine, {}, tmp_path, knobs=False)
    assert plan.argv == mine and plan.log_dir == "/x/logs" and plan.launcher == "torchrun"
    assert launcher_of(["srun", "python", "t.py"])[0] == "srun"
    assert launcher_of(["python", "train.py"])[0] == "python"


def test_evidence_switches_follow_the_jobs_torch_and_nccl_and_keep_what_it_set() -> None:
    cuda = {"torch": "2.13.0", "cuda": "12.8", "nccl": "2.27.5"}
    added, kept = evidence_env({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}, cuda, "/ev/fr")
    assert added["TORCH_FR_BUFFER_SIZE"] == "2000"
    assert added["TORCH_FR_DUMP_TEMP_FILE"] == "/ev/fr/rank_"
    assert added["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1" and added["NCCL_DEBUG"] == "WARN"
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in added and kept == {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
    assert "TORCH_DISTRIBUTED_DEBUG" not in added  # DETAIL adds collectives: never turned on
    old = evidence_env({}, {"torch": "2.6.0", "cuda": "12.4", "nccl": "2.21.5"}, "/ev/fr")[0]
    assert old["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000" and old["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == "/ev/fr/rank_"
    cpu = evidence_env({}, {"torch": "2.13.0", "cuda": None, "nccl": None}, "/ev/fr")[0]
    assert cpu == {"TORCH_FR_BUFFER_SIZE": "2000"}  # Gloo only: no NCCL switches


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "distdoctor.tui.cli", *argv], capture_output=True,
                          text=True, timeout=60)


def test_bad_usage_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for argv, says in ((["run"], "launch line after --"),
                       (["run", "--evidence-dir", str(tmp_path), "--", str(tmp_path / "nope")], "cannot start"),
                       (["run", "--stall", "0", "--", "true"], "--stall"),
                       (["watch", "--pid", "999999999"], "no such running process"),
                       (["watch", "--pid", "1", "--logs", str(tmp_path / "missing")], "no such file")):
        proc = _cli(*argv)
        assert proc.returncode == 2, (argv, proc.stdout, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and says in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr


def test_a_plain_command_that_finishes_is_finished(tmp_path: Path) -> None:
    proc = _cli("run", "--json", "--stall", "5", "--evidence-dir", str(tmp_path), "--",
                sys.executable, "-c", "print('hello from the job')")
    import json

    out = json.loads(proc.stdout)
    assert proc.returncode == 0 and out["outcome"] == "finished" and out["exit_code"] == 0
    assert "hello from the job" in proc.stderr
    failed = _cli("run", "--json", "--stall", "5", "--evidence-dir", str(tmp_path / "f"), "--",
                  sys.executable, "-c", "import sys; sys.exit(3)")
    assert failed.returncode == 1 and json.loads(failed.stdout)["exit_code"] == 3


def test_the_text_view_lists_the_evidence_not_the_priors_and_a_dead_ranks_exit_code() -> None:
    from distdoctor.probes.watch import Outcome, RankView
    from distdoctor.tui.commands.watch_view import render

    out = Outcome("failed", 1, verdict={"culprit": {"ranks": ["1"], "role": "crashed", "why": "raised"},
                                        "summary": "Rank 1 raised", "confidence": "confirmed"},
                  causes=[{"id": "rank-crash-deadlock", "score": 4.5, "basis": "evidence"},
                          {"id": "version-mismatch", "score": 1.0, "basis": "prior"}],
                  rows=[RankView("0", 11, "h", "dead", "<module> (t.py:1)", "", 0.0, 3.0, -15),
                        RankView("1", 12, "h", "dead", "<module> (t.py:1)", "", 0.0, 70.0, 1)],
                  session="s1")
    text = render(out)
    assert "outcome: failed (exit code 1)" in text and "culprit: rank 1 (crashed): raised" in text
    assert "rank-crash-deadlock" in text and "version-mismatch" not in text
    assert "exit code -15" in text and "exit code 1" in text and "t.py:1" not in text
