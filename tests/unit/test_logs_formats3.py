"""Mechanisms taught after the third measured batch (issue 21), each with a firing example and a
silent twin written from the message formats (UCX's signal handler, vLLM's and the CUDA driver
API's error texts, NCCL's bare version line, torchrun's agent), never copied from a case."""
from __future__ import annotations

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.logs import analyse_text

KB = load_knowledge(use_env=False)


def evidence(text: str, symptom: str | None = "error") -> list[str]:
    """The causes the lines are evidence for, best first."""
    return [c.id for c in analyse_text(text, KB, symptom=symptom).causes if c.basis == "evidence"]


# --- a bus error caught by UCX's handler inside NCCL's threads: /dev/shm behind a mapping ----------

UCX_SIGNAL = "[node01:40211:0:40290] Caught signal {n} ({name})\n==== backtrace (tid:  40290) ====\n" \
             " 0 0x0000000000059e97 ncclGroupEnd()  ???:0\n"


def test_a_bus_error_caught_by_ucx_is_shm_evidence() -> None:
    assert evidence(UCX_SIGNAL.format(n=7, name="Bus error: nonexistent physical address"))[:1] == \
        ["shm-insufficient"]


def test_a_segfault_caught_by_the_same_handler_is_not() -> None:
    assert "shm-insufficient" not in evidence(UCX_SIGNAL.format(n=11, name="Segmentation fault: address not mapped"))


# --- out of memory in the CUDA driver API's words ---------------------------------------------------

def test_driver_api_out_of_memory_is_cuda_oom() -> None:
    assert evidence("RuntimeError: CUDA Error: out of memory at /opt/src/csrc/allocator.cpp:80\n")[:1] == ["cuda-oom"]
    assert evidence("CudaAPIError: [2] Call to cuMemCreate results in CUDA_ERROR_OUT_OF_MEMORY\n")[:1] == ["cuda-oom"]


def test_another_driver_api_error_is_not() -> None:
    assert "cuda-oom" not in evidence("RuntimeError: CUDA Error: invalid argument at /opt/src/csrc/allocator.cpp:80\n")
    assert "cuda-oom" not in evidence("CudaAPIError: [1] Call to cuMemCreate results in CUDA_ERROR_INVALID_VALUE\n")


# --- NCCL's bare version line belongs to the process whose INFO lines lead to it ----------------------

def bare_versions(first: str, second: str, gap: int = 0) -> str:
    filler = "".join(f"epoch 0 step {i} loss 2.31\n" for i in range(gap))
    return (f"node01:4000:4000 [0] NCCL INFO Bootstrap : Using eth0:10.1.0.1<0>\n"
            f"node01:4000:4000 [0] NCCL INFO cudaDriverVersion 12040\n{filler}NCCL version {first}+cuda12.4\n"
            f"node02:4100:4100 [0] NCCL INFO Bootstrap : Using eth0:10.1.0.2<0>\n"
            f"node02:4100:4100 [0] NCCL INFO cudaDriverVersion 12040\n{filler}NCCL version {second}+cuda12.4\n"
            "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n")


def test_bare_version_lines_of_two_processes_that_differ_are_a_version_mismatch() -> None:
    assert evidence(bare_versions("2.18.1", "2.21.5"))[:1] == ["version-mismatch"]


def test_the_same_version_or_a_line_far_from_its_process_names_none() -> None:
    assert "version-mismatch" not in evidence(bare_versions("2.21.5", "2.21.5"))
    assert "version-mismatch" not in evidence(bare_versions("2.18.1", "2.21.5", gap=20))


# --- a rank the launcher stopped is a consequence of another's failure, never the culprit -----------

def torchrun_lost_peer(code2: int) -> str:
    """Rank 0's own lines lose their peer; torchrun's summary (elastic/multiprocessing/errors
    format) gives rank 1's exit and rank 2's; only rank 0's lines are on the console."""
    def failure(i: int, code: int) -> str:
        sig = "  (SIGTERM)" if code == -15 else " "
        return (f"[{i}]:\n  time      : 2026-12-01_10:00:05\n  host      : node01\n"
                f"  rank      : {i} (local_rank: {i})\n  exitcode  : {code} (pid: 510{i}){sig}\n"
                "  error_file: <N/A>\n  traceback : To enable traceback see: "
                "https://pytorch.org/docs/stable/elastic/errors.html\n")
    return ("[default0]:[rank0]: Traceback (most recent call last):\n"
            '[default0]:[rank0]:   File "/home/user/run/train.py", line 40, in <module>\n'
            "[default0]:[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection "
            "closed by peer [10.1.0.1]:29511\n"
            "E1201 10:00:05.100000 5000 torch/distributed/elastic/multiprocessing/api.py:869] failed "
            "(exitcode: 1) local_rank: 1 (pid: 5101) of binary: /usr/bin/python3\n"
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
            "============================================================\ntrain.py FAILED\n"
            "------------------------------------------------------------\nFailures:\n"
            + failure(2, code2) + "------------------------------------------------------------\n"
            "Root Cause (first observed failure):\n" + failure(1, 1)
            + "============================================================\n")


def culprit_ranks(text: str) -> list[str] | None:
    found = analyse_text(text, KB, symptom="error").culprit
    return None if found is None else found["ranks"]


def test_the_rank_torchrun_stopped_is_not_blamed_beside_one_that_exited() -> None:
    assert culprit_ranks(torchrun_lost_peer(-15)) == ["1"]


def test_two_ranks_that_exited_of_their_own_accord_are_both_named() -> None:
    assert culprit_ranks(torchrun_lost_peer(1)) == ["1", "2"]


# --- a restart that finished is recovery: the failure before it ended an attempt, not the run -------

ATTEMPT_FAILS = (
    "[default1]:[rank1]: Traceback (most recent call last):\n"
    '[default1]:[rank1]:   File "/home/user/run/train.py", line 52, in <module>\n'
    "[default1]:[rank1]: ConnectionRefusedError: [Errno 111] Connection refused\n"
    "[default0]:[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection "
    "closed by peer [10.1.0.1]:29511\n"
    "E1201 10:00:05.100000 5000 torch/distributed/elastic/multiprocessing/api.py:869] failed "
    "(exitcode: 1) local_rank: 1 (pid: 5101) of binary: /usr/bin/python3\n")
# torchrun --max-restarts: the agent starts the group again and every rank trains to the end
RESTARTED = "".join(f"[default{r}]:epoch 0 step {s} loss 2.31\n" for s in range(1, 6) for r in (0, 1))
FINISHED = "[default0]:Training completed. Do not forget to share your model\n[default1]:Training completed.\n"


def test_a_failed_attempt_the_restart_went_past_is_no_failure() -> None:
    report = analyse_text(ATTEMPT_FAILS + RESTARTED + FINISHED, KB, symptom="error")
    assert report.culprit is None
    assert "rank-crash-deadlock" not in [c.id for c in report.causes if c.basis == "evidence"]


def test_progress_after_the_exit_record_without_a_finish_is_no_restart() -> None:
    # a rank's buffered stdout may reach the console after its exit record: that is no recovery
    for text in (RESTARTED + ATTEMPT_FAILS, ATTEMPT_FAILS + RESTARTED):
        report = analyse_text(text, KB, symptom="error")
        assert report.culprit is not None and report.culprit["ranks"] == ["1"], text
        assert "rank-crash-deadlock" in [c.id for c in report.causes if c.basis == "evidence"]


# --- rank 0 out of memory in the work it does alone: that work explains the crash (GUIDE 4.2) -------

def rank0_fails_in_eval(error: str) -> str:
    return ("[rank0]: step 40 loss 2.3100\n[rank1]: step 40 loss 2.3200\n"
            "[rank0]: evaluating on the validation set\n[rank0]: Traceback (most recent call last):\n"
            '[rank0]:   File "/home/user/run/train.py", line 88, in evaluate\n'
            f"[rank0]: {error}\n"
            "[rank1]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by "
            "peer [10.1.0.1]:29511\n")


def test_rank0_out_of_memory_in_its_own_work_is_rank0_overload_first() -> None:
    for error in ("RuntimeError: [enforce fail at alloc_cpu.cpp:117] err == 0. DefaultCPUAllocator: can't allocate "
                  "memory: you tried to allocate 80000000000 bytes. Error code 12 (Cannot allocate memory)",
                  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB."):
        assert analyse_text(rank0_fails_in_eval(error), KB, symptom="error").causes[0].id == "rank0-overload", error


def test_another_error_of_rank0_in_its_own_work_stays_a_crash() -> None:
    causes = analyse_text(rank0_fails_in_eval("KeyError: 'val_loss'"), KB, symptom="error").causes
    assert causes[0].id == "rank-crash-deadlock"
    assert "rank0-overload" in [c.id for c in causes[1:]]
