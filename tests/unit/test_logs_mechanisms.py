"""Mechanism rules of the log analyser, each with a firing example and a silent twin, written from
the message formats in NCCL's, nccl-tests', torch's collect_env and nvidia-smi's sources:
NCCL's catch-all errors, GPUs that talk over PCIe only, and interfaces that only matter between
nodes."""
from __future__ import annotations

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.logs import analyse, analyse_text

KB = load_knowledge(use_env=False)

# torch's ProcessGroupNCCL message around ncclGetErrorString, and NCCL's own text for the code
SYSTEM_ERROR = ("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
                "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3\n"
                "ncclSystemError: System call (socket, malloc, munmap, etc) failed.\n")
SHM_DETAIL = ("node1:2041:2090 [0] include/shm.h:28 NCCL WARN Error while creating shared memory segment "
              "/dev/shm/nccl-gYwLsX (size 9637888)\n")
SOCKET_DETAIL = ("node1:2041:2090 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
                 "10.1.0.2<43117> failed : Software caused connection abort\n")


def ranked(text: str, symptom: str | None = "error") -> list[tuple[str, str]]:
    report = analyse_text(text, KB, symptom=symptom)
    return [(c.id, c.basis) for c in report.causes]


# --- NCCL's catch-all: the code names the kind of call, the detail line the subsystem ----------------

def test_a_bare_system_error_names_both_subsystems_and_shm_first() -> None:
    causes = ranked(SYSTEM_ERROR)
    evidence = [cid for cid, basis in causes if basis == "evidence"]
    assert set(evidence) == {"shm-insufficient", "network-unreachable"}
    assert causes[0] == ("shm-insufficient", "evidence")  # the catch-all symptom's order decides


def test_the_detail_line_decides_over_the_order() -> None:
    assert ranked(SOCKET_DETAIL + SYSTEM_ERROR)[0][0] == "network-unreachable"
    assert ranked(SHM_DETAIL + SYSTEM_ERROR)[0][0] == "shm-insufficient"


def test_a_reporter_typo_is_no_signature() -> None:
    # torch prints NCCL's own text: a misspelt paste matches nothing, it is not a known format
    causes = ranked("NCCL error in: ProcessGroupNCCL.cpp:272, unhanled system error\n")
    assert all(basis == "prior" for _cid, basis in causes)


# --- GPUs that talk over PCIe only, in a hang ---------------------------------------------------------

def collect_env(model: str, n: int) -> str:
    return "".join(f"GPU {i}: {model}\n" for i in range(n))


def test_pcie_only_gpus_in_a_hang_are_a_p2p_fact() -> None:
    causes = ranked(collect_env("NVIDIA GeForce RTX 4090", 4), symptom="hang")
    assert causes[0] == ("p2p-unsupported", "facts")


def test_pcie_gpus_stay_silent_for_an_error_one_gpu_nvlink_or_p2p_off() -> None:
    assert ("p2p-unsupported", "facts") not in ranked(collect_env("NVIDIA GeForce RTX 4090", 4), "error")
    assert ("p2p-unsupported", "facts") not in ranked(collect_env("NVIDIA GeForce RTX 4090", 1), "hang")
    assert ("p2p-unsupported", "facts") not in ranked(collect_env("NVIDIA A100-SXM4-80GB", 8), "hang")
    off = "node1:2041:2041 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.\n"
    assert ("p2p-unsupported", "facts") not in ranked(off + collect_env("NVIDIA RTX A6000", 2), "hang")
    shm = "node1:2041:2090 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n"
    assert ("p2p-unsupported", "facts") not in ranked(shm + collect_env("NVIDIA RTX A6000", 2), "hang")


def test_a_healthy_log_naming_pcie_gpus_is_no_failure() -> None:
    report = analyse_text(collect_env("NVIDIA GeForce RTX 3090", 2) + "step 10 loss 1.234\n", KB)
    assert not report.failed and not report.causes


# --- an interface NCCL uses between nodes, on a job the logs show on one host -------------------------

def nccl_tests(hosts: list[str]) -> str:
    rows = "".join(f"#  Rank {r:2d} Group  0 Pid {4000 + r:6d} on {h:>10s} device {r:2d} [0x{r + 1:02x}] "
                   "NVIDIA RTX A6000\n" for r, h in enumerate(hosts))
    return ("# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20\n"
            "#\n# Using devices\n" + rows
            + f"{hosts[0]}:4000:4012 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.0.1<0> "
            "[1]veth1a2b3c:fe80::1c2d:3eff:fe4f:5a6b%veth1a2b3c<0>\n")


def test_a_virtual_interface_is_no_fact_on_one_host() -> None:
    assert "nic-selection" not in [cid for cid, basis in ranked(nccl_tests(["box1", "box1"]), "hang")
                                   if basis != "prior"]


def test_a_virtual_interface_is_a_fact_across_hosts_or_when_the_hosts_are_unknown() -> None:
    assert ("nic-selection", "facts") in ranked(nccl_tests(["box1", "box2"]), "hang")
    # one host seen in an excerpt is not one host: only a listing of every rank says so
    excerpt = "box1:4000:4012 [0] NCCL INFO NET/Socket : Using [0]veth1a2b3c:fe80::1c2d<0>\n"
    assert ("nic-selection", "facts") in ranked(excerpt, "hang")


# --- the store's port taken by the job's own second rank 0 --------------------------------------------

# torch's TCPStore messages (torch/csrc/distributed/c10d/TCPStore*.cpp, socket.cpp)
PORT_TAKEN = ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
              "network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address "
              "already in use\n")
STORE_SHORT = "torch.distributed.DistStoreError: Timed out after 31 seconds waiting for clients. 1/2 clients joined.\n"


def test_a_taken_port_beside_the_jobs_own_waiting_store_is_a_duplicate_rank_0() -> None:
    causes = ranked(PORT_TAKEN + STORE_SHORT)
    assert causes[0] == ("rank-env-mismatch", "evidence")
    report = analyse_text(PORT_TAKEN + STORE_SHORT, KB, symptom="error")
    port = next(c for c in report.causes if c.id == "master-addr-port")
    assert port.against  # the holder is the job itself


def test_a_taken_port_alone_is_another_job_and_a_short_store_alone_no_duplicate() -> None:
    assert ranked(PORT_TAKEN)[0] == ("master-addr-port", "evidence")
    report = analyse_text(STORE_SHORT, KB, symptom="error")
    assert not any("rank 0" in r for c in report.causes for r in c.reasons)


# --- who waited, who was late, who merely left: the culprit from each rank's own lines ---------------

def per_rank(tmp_path, files: dict[str, str], symptom: str | None = "hang"):
    folder = tmp_path / "logs"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return analyse([str(folder)], KB, symptom=symptom)


GLOO_TIMEOUT = ("[rank{r}]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
                "Timed out waiting 10000ms for recv operation to complete\n")
GLOO_CLOSED = ("[rank{r}]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection "
               "closed by peer [127.0.0.1]:47510\n")


def rank_log(r: int, last_seen: str, end: str) -> str:
    # a logging-module line with the rank tag inside it, after the timestamp and the level
    return (f"2026-12-01 10:00:00,000 INFO [rank{r}] train: init done: world_size=3\n"
            f"[rank{r}] epoch 0 step 1 loss 0.1\n"
            f"2026-12-01 {last_seen} INFO [rank{r}] train: waiting for the other ranks\n"
            + end.format(r=r))


def test_the_rank_that_arrived_after_the_others_timeout_is_the_late_one(tmp_path) -> None:
    report = per_rank(tmp_path, {
        "rank0.log": rank_log(0, "10:00:02,000", GLOO_TIMEOUT),
        "rank1.log": rank_log(1, "10:00:02,100", GLOO_TIMEOUT),
        "rank2.log": rank_log(2, "10:00:20,000", GLOO_CLOSED),  # 18 s later: past the 10 s timeout
    })
    assert report.culprit is not None and report.culprit["ranks"] == ["2"] and report.culprit["role"] == "stuck"


def test_a_lost_peer_within_the_timeout_is_no_late_arrival(tmp_path) -> None:
    report = per_rank(tmp_path, {
        "rank0.log": rank_log(0, "10:00:02,000", GLOO_TIMEOUT),
        "rank1.log": rank_log(1, "10:00:02,100", GLOO_TIMEOUT),
        "rank2.log": rank_log(2, "10:00:05,000", GLOO_CLOSED),  # 3 s later: it waited with them
    })
    assert report.culprit is None or report.culprit["ranks"] != ["2"]


SPAWN_TIMEOUT = ("Traceback (most recent call last):\n"
                 "torch.multiprocessing.spawn.ProcessRaisedException: \n\n"
                 "-- Process 1 terminated with the following error:\n"
                 "Traceback (most recent call last):\n"
                 '  File "/work/train.py", line 139, in worker\n'
                 '    dist.init_process_group("gloo", rank=rank, world_size=world)\n'
                 "torch.distributed.DistStoreError: wait timeout after 10000ms, keys: /default_pg/0//cpu//0/0\n")


def test_a_spawned_process_that_ended_waiting_is_no_crash() -> None:
    causes = ranked(SPAWN_TIMEOUT, symptom="hang")
    assert causes[0] == ("rank-env-mismatch", "evidence")  # a rank never wrote its key


def test_a_spawned_process_that_raised_its_own_error_is_a_crash() -> None:
    own = SPAWN_TIMEOUT.replace("torch.distributed.DistStoreError: wait timeout after 10000ms, keys: "
                                "/default_pg/0//cpu//0/0", "ValueError: bad record 17 in shard 3")
    assert ranked(own, symptom="hang")[0] == ("rank-crash-deadlock", "evidence")


REFUSED = ("Traceback (most recent call last):\n"
           '  File "/usr/lib/python3.11/socket.py", line 836, in create_connection\n'
           "ConnectionRefusedError: [Errno 111] Connection refused\n")


def test_a_failure_line_every_rank_trained_past_was_handled() -> None:
    text = ("[rank0] step 1 loss 0.1\n[rank1] step 1 loss 0.1\n" + REFUSED
            + "[rank0] step 2 loss 0.1\n[rank1] step 2 loss 0.1\n")
    report = analyse_text(text, KB)
    assert not report.failed and all(c.basis != "evidence" for c in report.causes)


def test_a_failure_line_after_which_a_rank_went_quiet_is_evidence() -> None:
    text = ("[rank0] step 1 loss 0.1\n[rank1] step 1 loss 0.1\n" + REFUSED + "[rank0] step 2 loss 0.1\n")
    report = analyse_text(text, KB)
    assert report.failed and report.causes[0].id == "network-unreachable"


def test_an_abort_after_the_last_batch_yields_to_uneven_inputs(tmp_path) -> None:
    def elastic(r: int, code: int) -> str:  # torchrun's failure summary for one rank
        return (f"[{r}]:\n  time      : 2026-12-01_10:00:30\n  host      : node01\n  rank      : {r} "
                f"(local_rank: {r})\n  exitcode  : {code} (pid: 4{r}00)\n")
    files = {
        "rank0.log": "[rank0] 80 records, 10 batches\n[rank0] epoch 0 step 10 loss 0.1\n",
        "rank1.log": "[rank1] 88 records, 11 batches\n[rank1] epoch 0 step 10 loss 0.1\n" + GLOO_CLOSED.format(r=1),
    }
    aborted = per_rank(tmp_path / "abort", {**files, "console.log": elastic(0, -6)}, symptom="error")
    assert aborted.culprit["ranks"] == ["1"] and aborted.culprit["role"] == "stuck"
    killed = per_rank(tmp_path / "kill", {**files, "console.log": elastic(0, -9)}, symptom="error")
    assert killed.culprit["ranks"] == ["0"] and killed.culprit["role"] == "crashed"


def test_a_rank_tag_after_a_logging_timestamp_names_the_rank() -> None:
    from distdoctor.knowledge.logs.extract import who
    assert who("2026-12-01 18:12:13,755 INFO [rank2] train: using cached config").rank == "2"
    assert who("12/01/2026 04:00:53 - INFO - __main__ - [RANK 0] epoch 0 step 10").rank == "0"
    assert who("2026-12-01 18:12:13,755 INFO train: 3 ranks ready").rank is None


# --- a traceback that logging printed under a WARNING record was caught ------------------------------

def logged_tb(level: str) -> str:
    # logging.Formatter appends the traceback (exc_info) right after the record's own line
    return (f"2026-12-01 10:00:05,000 {level} [rank0] train: metrics push failed; continuing\n" + REFUSED)


def test_a_traceback_printed_by_a_warning_record_is_handled() -> None:
    report = analyse_text("[rank0] step 8 loss 0.1\n" + logged_tb("WARNING"), KB)
    assert not report.failed and all(c.basis != "evidence" for c in report.causes)


def test_a_traceback_after_an_error_record_or_on_its_own_is_a_failure() -> None:
    for text in ("[rank0] step 8 loss 0.1\n" + logged_tb("ERROR"),
                 "[rank0] step 8 loss 0.1\n2026-12-01 10:00:05,000 WARNING [rank0] train: slow step\n\n" + REFUSED):
        report = analyse_text(text, KB)
        assert report.failed and report.causes[0].id == "network-unreachable", text


# --- how far a hang got, from the watchdog's own SeqNum -----------------------------------------------

def watchdog_line(seq: int) -> str:  # ProcessGroupNCCL's watchdog format
    return (f"[rank0]:[E1218 12:49:09.086536415 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, "
            "Timeout(ms)=600000) ran for 600046 milliseconds before timing out.\n")


def refined(text: str) -> set[str]:
    report = analyse_text(text, KB, symptom="hang")
    return {r for c in report.causes for r in c.reasons if r.startswith("the symptom")}


def test_a_timeout_after_many_collectives_is_a_hang_mid_training() -> None:
    assert refined(watchdog_line(517)) == {"the symptom hang-mid-training points here first"}


def test_a_timeout_in_the_first_collective_is_a_hang_at_the_first_step() -> None:
    assert refined(watchdog_line(1)) == {"the symptom hang-first-step points here first"}


# --- every rank waited: the launcher's exit codes are the waiters leaving ------------------------------

def waiting_in(r: int, op: str) -> str:
    return (f"[rank{r}] step 4 loss 0.1\n[rank{r}]: Traceback (most recent call last):\n"
            f'[rank{r}]:   File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", '
            f"line 3012, in {op}\n" + GLOO_TIMEOUT.format(r=r))


EXITS = ("E1201 19:06:32.839000 27841 torch/distributed/elastic/multiprocessing/api.py:1002] failed "
         "(exitcode: 1) local_rank: 0 (pid: 27844) of binary: /venv/bin/python\n"
         "  exitcode  : 1 (pid: 27844)\n")


def test_exit_codes_of_ranks_that_all_waited_are_no_crash(tmp_path) -> None:
    report = per_rank(tmp_path, {"rank0.log": waiting_in(0, "all_gather"), "rank1.log": waiting_in(1, "all_reduce"),
                                 "console.log": EXITS})
    assert report.causes[0].id == "asymmetric-collective"
    assert not any(r.startswith("a process crashed") for c in report.causes for r in c.reasons)
    # the story tells the two collectives apart
    assert "rank 0 timed out in all_gather" in report.summary.lower() or "in allgather" in report.summary
    assert "in allreduce" in report.summary or "in all_reduce" in report.summary


def test_an_exit_code_beside_a_rank_with_no_wait_of_its_own_is_still_a_crash(tmp_path) -> None:
    report = per_rank(tmp_path, {"rank0.log": waiting_in(0, "all_reduce"), "rank1.log": "[rank1] step 4 loss 0.1\n",
                                 "console.log": EXITS})
    assert report.failed and report.causes[0].basis == "evidence"


def test_a_caught_error_in_a_teed_console_is_handled_by_the_ranks_progress_there(tmp_path) -> None:
    steps = "".join(f"[rank0] step {n} loss 0.1\n" for n in range(1, 9))
    console = "".join(f"[default0]:[rank0] step {n} loss 0.1\n" for n in range(1, 4)) + (
        "[default0]:Traceback (most recent call last):\n"
        '[default0]:  File "/work/train.py", line 17, in <module>\n'
        "[default0]:FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/metrics.json'\n"
    ) + "".join(f"[default0]:[rank0] step {n} loss 0.1\n" for n in range(4, 9))
    # the rank's own file is read first: its progress must not hide the console's
    report = per_rank(tmp_path, {"a-rank0.log": steps, "console.log": console}, symptom=None)
    assert not report.failed
