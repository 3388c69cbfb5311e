"""Mechanisms taught after the fourth measured batch (issue 21), each with a firing example and a
silent twin written from the message formats (moreutils' `ts`, glog's header that torch's C++
logging and torchrun's agent print, Python's KeyboardInterrupt, torchrun's exit summary), never
copied from a case."""
from __future__ import annotations

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.diagnosis import IncidentEvidence, diagnose
from distdoctor.knowledge.logs import analyse_text, extract as x

KB = load_knowledge(use_env=False)


def report(text: str, symptom: str | None = "error"):
    return analyse_text(text, KB, symptom=symptom)


# --- timestamps and glog headers in front of a line hide neither its rank nor its exception ----------

def test_a_timestamp_or_glog_header_before_the_last_line_of_a_traceback_is_stripped() -> None:
    assert x.exception("Mar 04 09:15:02.118270 [rank3]: ValueError: bad shard") == ("ValueError", "bad shard")
    assert x.exception("2026-03-04 09:15:02,118 [rank3]: ValueError: bad shard") == ("ValueError", "bad shard")
    assert x.exception("E0304 09:15:02.118000 4412 torch/utils/data/dataloader.py:77] ValueError: bad shard") == \
        ("ValueError", "bad shard")
    assert x.exception("[rank2]:[W0304 09:15:02.118000 4412 torch/x.py:9] KeyError: 'step'") == ("KeyError", "'step'")
    assert x.who("Mar 04 09:15:02.118270 [rank3]: ValueError: bad shard").rank == "3"


def test_a_line_that_only_mentions_an_error_after_the_header_is_no_exception() -> None:
    assert x.exception("E0304 09:15:02.118000 4412 torch/x.py:9] failed with ValueError: bad shard") is None
    assert x.exception("Mar 04 09:15:02.118270 step 5 done, no Error: none") is None
    assert x.strip_lead("Mary: ValueError: x") == "Mary: ValueError: x"


TS_CRASH = ("Mar 04 09:15:01.000100 [rank0]: step 4 loss 0.51\n"
            "Mar 04 09:15:01.000200 [rank1]: step 4 loss 0.50\n"
            "Mar 04 09:15:02.118200 [rank1]: Traceback (most recent call last):\n"
            "Mar 04 09:15:02.118230 [rank1]:   File \"/srv/job/train.py\", line 88, in step\n"
            "Mar 04 09:15:02.118270 [rank1]: ValueError: bad shard 17\n"
            "Mar 04 09:15:03.902000 [rank0]: Traceback (most recent call last):\n"
            "Mar 04 09:15:03.902100 [rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] "
            "Connection closed by peer [10.0.0.2]:41023\n")


def test_a_ts_prefixed_console_names_the_rank_that_raised() -> None:
    r = report(TS_CRASH)
    assert r.culprit is not None and r.culprit["ranks"] == ["1"] and r.culprit["role"] == "crashed"
    assert r.timeline["1"]["end"]["type"] == "ValueError"


# --- SIGINT to one rank: its KeyboardInterrupt is its own end, a stop from outside ----------------------

INTERRUPT = ("[rank1]: Traceback (most recent call last):\n"
             "[rank1]:   File \"/srv/job/train.py\", line 40, in wait_for_shard\n"
             "[rank1]: KeyboardInterrupt\n")
CLOSED = ("[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
          "[10.0.0.2]:41023\n")
TIMED = ("[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:84] Timed out waiting "
         "30000ms for recv operation to complete\n")
STEP = "[rank0]: step 9 loss 0.31\n[rank1]: step 9 loss 0.30\n"


def test_the_interrupted_rank_is_the_one_whose_peer_lost_it() -> None:
    r = report(STEP + INTERRUPT + CLOSED)
    assert r.culprit is not None and r.culprit["ranks"] == ["1"]
    assert r.timeline["1"]["end"]["kind"] == "killed" and "SIGINT" in r.timeline["1"]["end"]["detail"]
    assert r.causes[0].id == "rank-crash-deadlock"


def test_an_interrupted_rank_whose_peer_timed_out_was_stuck_before() -> None:
    r = report(STEP + TIMED + INTERRUPT, symptom="hang")
    assert r.culprit is not None and r.culprit["ranks"] == ["1"] and r.culprit["role"] == "stuck"
    assert r.causes[0].id == "collective-timeout"


def test_every_rank_interrupted_together_names_no_rank() -> None:
    both = STEP + INTERRUPT + INTERRUPT.replace("rank1", "rank0")
    r = report(both)
    assert r.culprit is None
    assert not [c for c in r.causes if c.basis == "evidence"]


def test_the_launchers_own_interrupt_names_no_rank() -> None:
    r = report(STEP + "Traceback (most recent call last):\n  File \"/usr/bin/torchrun\", line 8, in <module>\n"
               "KeyboardInterrupt\n")
    assert r.culprit is None and all(row["end"]["kind"] != "killed" for row in r.timeline.values())


# --- the store-based barrier's count is a rank late to the barrier, not a rank never started ----------

BARRIER = ("I0304 09:20:11.500000 {pid} torch/distributed/distributed_c10d.py:400] Waiting in store based barrier "
           "to initialize process group for rank: {r}, key: store_based_barrier_key:3 (world_size=4, "
           "num_workers_joined=3, timeout=0:30:00 error=None)\n")


def test_ranks_waiting_in_the_store_barrier_are_a_wait_not_a_missing_rank() -> None:
    r = report(BARRIER.format(pid=4100, r=0) + BARRIER.format(pid=4101, r=2), symptom="hang")
    assert not [c.id for c in r.causes if c.basis == "evidence"]  # where it waits, not why
    assert r.causes[0].id == "collective-timeout" and r.causes[0].basis == "facts"
    assert any("3 of 4 ranks reached the store-based barrier" in line for line in r.collect)


def test_the_barrier_that_gave_up_is_a_timeout_and_a_completed_one_is_nothing() -> None:
    gave_up = ("[rank2]: torch.distributed.DistStoreError: Timed out initializing process group in store based "
               "barrier on rank 2, for key: store_based_barrier_key:3 (world_size=4, num_workers_joined=3, "
               "timeout=0:30:00 error=None)\n")
    assert [c.id for c in report(gave_up, "hang").causes if c.basis == "evidence"][:1] == ["collective-timeout"]
    done = "[rank2]: Rank 2: Completed store-based barrier for key:store_based_barrier_key:3 with 4 nodes.\n"
    assert not [c for c in report(done, "hang").causes if c.basis != "prior"]


# --- two sources of the rank layout disagree on the number of processes --------------------------------

def test_a_launchers_world_size_against_torchs_is_a_rank_variable_mismatch() -> None:
    line = "[rank3]: AssertionError: MPI world size 32 does not match torch world size 16\n"
    assert [c.id for c in report(line).causes if c.basis == "evidence"][:1] == ["rank-env-mismatch"]
    assert [c.id for c in report("RuntimeError: world_size mismatch: store says 4, env says 2\n").causes
            if c.basis == "evidence"][:1] == ["rank-env-mismatch"]


def test_a_world_size_that_is_only_announced_is_not() -> None:
    line = "[rank3]: MPI world size 32 matches torch world size 32, local rank 3\n"
    assert "rank-env-mismatch" not in [c.id for c in report(line).causes if c.basis == "evidence"]


# --- DL906 names a silent rank from a missing line: only lines present make it more than an inference --

WATCHDOG = ("[rank0]:[E0304 09:40:00.001000000 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=4096, "
            "NumelOut=4096, Timeout(ms)=600000) ran for 600042 milliseconds before timing out.\n")
QUIET = "[rank0]: step 30 loss 1.20\n[rank1]: step 30 loss 1.21\n[rank1]: prefetching shard 31\n"
STOPPED = ("  rank      : 1 (local_rank: 1)\n  exitcode  : -15 (pid: 5102)\n"
           "  traceback : Signal 15 (SIGTERM) received by PID 5102\n")


def test_a_silent_rank_named_only_by_a_missing_failure_line_is_an_inference() -> None:
    r = report(QUIET + WATCHDOG, symptom="hang")
    assert r.culprit_rule == "DL906" and r.culprit["ranks"] == ["1"] and r.culprit.get("inferred")


def test_a_silent_rank_the_launcher_stopped_after_the_timeout_was_alive() -> None:
    r = report(QUIET + WATCHDOG + STOPPED, symptom="hang")
    assert r.culprit_rule == "DL906" and r.culprit["ranks"] == ["1"] and not r.culprit.get("inferred")


# --- a bare SIGKILL is a kill, not a guessed out-of-memory -------------------------------------------------

KILLED = ("[rank0]: step 5 loss 0.31 memory: rss 300 MiB\n[rank1]: step 5 loss 0.30 memory: rss 2900 MiB\n"
          "[rank1]: step 6 loss 0.29 memory: rss 3900 MiB\n" + CLOSED +
          "E0304 09:15:09.000000 4400 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) "
          "local_rank: 1 (pid: 4402) of binary: /usr/bin/python3\n"
          "  rank      : 1 (local_rank: 1)\n  exitcode  : -9 (pid: 4402)\n"
          "  traceback : Signal 9 (SIGKILL) received by PID 4402\n")


def test_a_sigkilled_rank_with_growing_memory_lines_is_a_kill_not_an_oom() -> None:
    r = report(KILLED)
    assert r.culprit is not None and r.culprit["ranks"] == ["1"]
    assert r.timeline["1"]["end"]["kind"] == "killed" and "SIGKILL" in r.timeline["1"]["end"]["detail"]
    ev = [c.id for c in r.causes if c.basis == "evidence"]
    assert ev[:1] == ["rank-crash-deadlock"] and "cuda-oom" not in ev and "other" not in ev


def test_the_kernels_own_oom_line_names_host_memory() -> None:
    ev = [c.id for c in report(KILLED + "[Tue Mar  4 09:15:08 2026] Out of memory: Killed process 4402 (python3) "
                               "total-vm:81234567kB\n").causes if c.basis == "evidence"]
    assert "other" in ev


# --- a barrier entered by one rank after the others finished ------------------------------------------------

def _finish(rank: int, t: str) -> str:
    return f"Mar 04 10:00:{t} [rank{rank}]: step 12 loss 0.20\nMar 04 10:00:{t} [rank{rank}]: training done\n"


def test_the_rank_left_in_a_barrier_after_the_others_finished_is_named_with_them() -> None:
    stuck = ("Mar 04 10:00:05.000000 [rank2]: uploading the final checkpoint\n"
             "Mar 04 10:00:45.000000 [rank2]: Traceback (most recent call last):\n"
             "Mar 04 10:00:45.000100 [rank2]:   File \"/srv/job/train.py\", line 120, in publish\n"
             "Mar 04 10:00:45.000200 [rank2]:     dist.barrier()\n"
             "Mar 04 10:00:45.000300 [rank2]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:84] "
             "Timed out waiting 30000ms for recv operation to complete\n")
    r = report(_finish(0, "01.000000") + _finish(1, "01.000100") + _finish(2, "01.000200") + stuck, symptom="hang")
    assert r.culprit is not None and r.culprit["ranks"] == ["2"] and r.culprit["role"] == "stuck"
    assert "rank 0, 1 had finished" in r.summary
    assert r.causes[0].id == "asymmetric-collective"


def test_every_rank_finished_after_the_barrier_names_nobody() -> None:
    r = report(_finish(0, "01.000000") + _finish(1, "01.000100") + _finish(2, "01.000200"), symptom="hang")
    assert r.culprit is None and not [c for c in r.causes if c.basis == "evidence"]


# --- DDP's check that every rank built the same model: a divergence, not a crash of one rank --------------

def _ddp_fails(message: str) -> str:
    return ("[rank0]: step 0 building model\n[rank1]: step 0 building model\n"
            "[rank1]: Traceback (most recent call last):\n"
            "[rank1]:   File \"/srv/job/train.py\", line 51, in main\n"
            f"[rank1]: RuntimeError: {message}\n" + CLOSED)


def test_ranks_that_built_different_models_are_not_a_crash_of_one_rank() -> None:
    r = report(_ddp_fails("[1]: params[3] in this process with sizes [64, 48] appears not to match sizes of the "
                          "same param in process 0."))
    assert r.causes[0].id == "other" and r.culprit["ranks"] == ["1"]
    assert any("configured differently" in a for c in r.causes if c.id == "rank-crash-deadlock" for a in c.against)


def test_another_error_at_the_same_place_stays_a_crash() -> None:
    r = report(_ddp_fails("shape '[64, 48]' is invalid for input of size 1000"))
    assert r.causes[0].id == "rank-crash-deadlock"


# --- ranks known only from the launcher's exit record: their own output is what to collect -------------

SUMMARY = ("Failures:\n[1]:\n  time      : 2026-03-04_10:05:42\n  host      : node01\n  rank      : 1 (local_rank: 1)\n"
           "  exitcode  : -15 (pid: 7339)\n  error_file: <N/A>\n  traceback : Signal 15 (SIGTERM) received by PID 7339\n"
           "Root Cause (first observed failure):\n[0]:\n  time      : 2026-03-04_10:05:42\n  host      : node01\n"
           "  rank      : 0 (local_rank: 0)\n  exitcode  : 1 (pid: 7338)\n  error_file: <N/A>\n")


def test_a_console_with_only_the_launchers_summary_asks_for_the_ranks_own_output() -> None:
    r = report(SUMMARY, symptom="hang")
    assert any(line.startswith("the own output of rank 0, 1") for line in r.collect)


def test_a_rank_whose_own_lines_are_given_is_not_asked_for() -> None:
    own = "[rank0]: step 3 loss 0.40\n[rank0]: RuntimeError: Timed out waiting 8000ms for recv operation to complete\n"
    r = report(own + SUMMARY, symptom="hang")
    asked = [line for line in r.collect if line.startswith("the own output of rank")]
    assert asked and asked[0].startswith("the own output of rank 1:")


# --- the main process tokenising while another rank's store wait runs out ---------------------------------

TOKENIZING = "Tokenizing train split (num_proc=32):  97%|#########7| 97011/100000 [31:02<00:55, 52.10 examples/s]\n"
STORE_WAIT = ("[rank2]:[W0304 11:02:10.000000000 socket.cpp:489] [c10d] waitForInput: socket SocketImpl(fd=41, "
              "addr=[node01]:52110, remote=[node01]:29500) timed out after 1800000ms\n")


def test_the_main_process_tokenising_while_a_rank_waits_in_the_store_is_rank0_overload() -> None:
    r = report(TOKENIZING + STORE_WAIT)
    assert r.causes[0].id == "rank0-overload" and "network-unreachable" not in [
        c.id for c in r.causes if c.basis == "evidence"]


def test_tokenising_with_no_rank_waiting_is_no_evidence() -> None:
    assert not [c for c in report(TOKENIZING).causes if c.basis == "evidence"]
    assert not [c for c in report(STORE_WAIT).causes if c.basis == "evidence"]  # a wait says no why


# --- the launcher's own teardown after every rank finished is no failure of the job ------------------------

EXIT_BARRIER = ("E0304 12:00:09.019000 552 torch/distributed/elastic/agent/server/api.py:1008] Error waiting on exit "
                "barrier. Elapsed: 0.04 seconds\n"
                "E0304 12:00:09.019000 552 torch/distributed/elastic/agent/server/api.py:1008] "
                "torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. "
                "Did the remote server shutdown or crash?\n")
DONE = "[rank0]: step 8 loss 0.14\n[rank1]: step 8 loss 0.15\n[rank0]: training done\n[rank1]: training done\n"


def test_an_exit_barrier_error_after_every_rank_finished_is_no_evidence() -> None:
    assert not [c for c in report(DONE + EXIT_BARRIER).causes if c.basis != "prior"]


def test_the_same_error_before_a_rank_finished_still_counts() -> None:
    early = "[rank0]: step 8 loss 0.14\n[rank1]: step 8 loss 0.15\n[rank0]: training done\n" + EXIT_BARRIER
    assert [c for c in report(early).causes if c.basis == "evidence"]


# --- the launcher's exit records when every rank ended waiting are the waiters' own exits ------------------

def _timed(rank: int) -> str:
    return (f"[rank{rank}]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:84] Timed out "
            "waiting 30000ms for recv operation to complete\n")


EXITS = ("E0304 13:00:00.100000 900 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
         "local_rank: 0 (pid: 901) of binary: /usr/bin/python3\n"
         "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
         "  rank      : 0 (local_rank: 0)\n  exitcode  : 1 (pid: 901)\n")


def test_exit_records_of_ranks_that_all_timed_out_are_no_crash() -> None:
    r = report(_timed(0) + _timed(1) + EXITS, symptom="hang")
    assert "rank-crash-deadlock" not in [c.id for c in r.causes if c.basis == "evidence"]
    timeout = next(c for c in r.causes if c.id == "collective-timeout")
    assert not any("crashed first" in a for a in timeout.against)


def test_a_rank_that_failed_on_its_own_still_makes_them_a_crash() -> None:
    own = "[rank1]: Traceback (most recent call last):\n[rank1]: ValueError: bad shard 4\n"
    r = report(_timed(0) + own + EXITS, symptom="hang")
    assert "rank-crash-deadlock" in [c.id for c in r.causes if c.basis == "evidence"]


# --- a connection that was up and then reset: the peer went away, not the network ---------------------------

def test_a_reset_store_connection_is_a_lost_peer_not_a_network_fault() -> None:
    line = ("[rank2]: torch.distributed.DistBackendError: [2] is setting up NCCL communicator and retrieving "
            "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Connection "
            "reset by peer\n")
    ev = [c.id for c in report(line).causes if c.basis == "evidence"]
    assert ev[:1] == ["rank-crash-deadlock"] and "network-unreachable" not in ev


def test_a_refused_connection_is_still_the_network_or_the_address() -> None:
    line = ("[rank2]: torch.distributed.DistNetworkError: The client socket has failed to connect to [node01]:29500 "
            "(errno: 111 - Connection refused).\n")
    ev = [c.id for c in report(line).causes if c.basis == "evidence"]
    assert ev and ev[0] in ("network-unreachable", "master-addr-port") and "rank-crash-deadlock" not in ev[:1]


# --- a lost peer after a finish line nobody waiting wrote: a crash and an early finish fit alike ---------

def test_a_peer_lost_after_another_ranks_finish_line_is_not_named_crashed() -> None:
    text = ("[rank0]: step 3 loss 0.20\n[rank1]: step 3 loss 0.21\n`Trainer.fit` stopped: `max_epochs=3` reached.\n"
            + CLOSED.replace("rank0", "rank1"))
    r = report(text)
    assert r.culprit is None


def test_without_the_finish_line_the_silent_peer_is_the_one_that_exited() -> None:
    r = report("[rank0]: step 3 loss 0.20\n[rank1]: step 3 loss 0.21\n" + CLOSED.replace("rank0", "rank1"))
    assert r.culprit is not None and r.culprit["ranks"] == ["0"] and r.culprit_rule == "DL905"


# --- a named culprit says who failed, not why: one weak hint alone is no answer ---------------------------

def _diagnosis(text: str, symptom: str = "error"):
    return diagnose(KB, IncidentEvidence(symptom=symptom, logs=report(text, symptom).to_dict()))


def test_a_rank_failing_on_a_weak_hint_alone_is_unknown() -> None:
    d = _diagnosis("[rank0]: step 2 loss 0.50\n[rank0]: Traceback (most recent call last):\n"
                   "[rank0]: RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)\n")
    assert d.culprit["ranks"] == ["0"] and d.confidence == "unknown"


def test_a_strong_line_of_the_named_rank_still_answers() -> None:
    d = _diagnosis("[rank0]: step 2 loss 0.50\n[rank0]: Traceback (most recent call last):\n"
                   "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    assert d.causes[0].id == "cuda-oom" and d.confidence in ("likely", "confirmed")


# --- per-rank files with no clock: Gloo's socket timeouts order the lost peer after them ----------------------

def _files(tmp_path, texts: dict[str, str]) -> list[str]:
    out = []
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
        out.append(str(tmp_path / name))
    return out


def test_a_rank_that_lost_its_peers_after_their_socket_timeouts_is_the_late_one(tmp_path) -> None:
    from distdoctor.knowledge.logs import analyse
    r = analyse(_files(tmp_path, {"rank0.log": "[rank0]: step 4 loss 0.3\n" + _timed(0),
                                  "rank1.log": "[rank1]: step 4 loss 0.3\n" + _timed(1),
                                  "rank2.log": "[rank2]: step 4 loss 0.3\n" + CLOSED.replace("rank0", "rank2")}),
                KB, symptom="hang")
    assert r.culprit_rule == "DL904" and r.culprit["ranks"] == ["2"] and r.culprit.get("inferred")


def test_a_watchdog_timeout_says_nothing_of_the_peers_connection(tmp_path) -> None:
    from distdoctor.knowledge.logs import analyse
    r = analyse(_files(tmp_path, {"rank0.log": "[rank0]: step 4 loss 0.3\n" + WATCHDOG,
                                  "rank2.log": "[rank2]: step 4 loss 0.3\n" + CLOSED.replace("rank0", "rank2")}),
                KB, symptom="hang")
    assert r.culprit_rule != "DL904"


# --- the world size as scripts print it ---------------------------------------------------------------------

def test_the_world_size_is_read_from_the_common_phrasings() -> None:
    for line, n in (("INFO rank=1 process group ready: rank 1/4 local_rank 1", 4), ("world_size=8, backend=nccl", 8),
                    ("WORLD_SIZE=3 MASTER_PORT=29500", 3), ("rank 1 of 2 ready", 2)):
        m = x.WORLD.search(line)
        assert m and int(m.group("w") or m.group("w2")) == n, line


def test_a_local_rank_count_or_an_epoch_is_no_world_size() -> None:
    for line in ("local_rank 1/4 on node2", "epoch 1/10 rank=0", "frank 3/4"):
        assert x.WORLD.search(line) is None, line


# --- the waiters name rank 0 late, and its own last lines show work only it does ----------------------------

def test_rank0_named_late_while_its_own_lines_show_eval_is_rank0_overload() -> None:
    text = ("[rank0]: step 4 loss 0.40\n[rank1]: step 4 loss 0.41\n[rank0]: running evaluation on 2000 samples\n"
            + _timed(1) + CLOSED)
    r = report(text, symptom="hang")
    assert r.culprit["ranks"] == ["0"] and r.causes[0].id == "rank0-overload"


def test_rank0_named_late_with_no_such_line_stays_a_timeout() -> None:
    text = "[rank0]: step 4 loss 0.40\n[rank1]: step 4 loss 0.41\n" + _timed(1) + CLOSED
    r = report(text, symptom="hang")
    assert r.culprit["ranks"] == ["0"] and r.causes[0].id == "collective-timeout"


# --- of several silent ranks, the one whose own lines show it at work --------------------------------------

def _silent_world(rank0_last: str) -> str:
    return ("[rank0]: step 3 loss 0.30\n[rank1]: step 3 loss 0.31\n[rank2]: step 3 loss 0.32\n"
            f"[rank0]: {rank0_last}\n" + _timed(2).replace("recv", "send"))


def test_of_several_silent_ranks_the_one_writing_a_cache_is_named() -> None:
    r = report(_silent_world("feature cache: chunk 7/12 written"), symptom="hang")
    assert r.culprit["ranks"] == ["0"] and r.culprit.get("inferred")
    assert r.causes[0].id == "rank0-overload"


def test_of_several_silent_ranks_none_busy_names_them_all() -> None:
    r = report(_silent_world("feature cache refreshed"), symptom="hang")
    assert r.culprit["ranks"] == ["0", "1"] and r.culprit.get("inferred")


def test_a_stamped_torchrun_summary_still_names_its_rank() -> None:
    stamped = "".join(f"Mar 04 10:05:42.{n:06d} {line}\n" for n, line in enumerate(SUMMARY.splitlines()))
    r = report(stamped, symptom="hang")
    assert r.timeline["1"]["exitcode"] == -15 and r.timeline["0"]["exitcode"] == 1


# --- a rank interrupted while it waited in a collective was a waiter someone stopped -----------------------

IN_ALLREDUCE = ("[rank0]: Traceback (most recent call last):\n"
                "[rank0]:   File \"/srv/job/train.py\", line 77, in sync_metrics\n"
                "[rank0]:     dist.all_reduce(total)\n"
                "[rank0]:   File \"/venv/site-packages/torch/distributed/distributed_c10d.py\", line 2501, in all_reduce\n"
                "[rank0]:     work.wait()\n"
                "[rank0]: KeyboardInterrupt\n")


def test_a_rank_interrupted_inside_a_collective_is_a_waiter_not_the_culprit() -> None:
    r = report("[rank0]: step 3 loss 0.3\n" + IN_ALLREDUCE, symptom="hang")
    assert r.culprit is None and not [c for c in r.causes if c.basis == "evidence"]
    two = report("[rank0]: step 3 loss 0.3\n[rank1]: step 3 loss 0.3\n[rank1]: loading shard 4\n" + IN_ALLREDUCE,
                 symptom="hang")
    assert two.culprit is not None and two.culprit["ranks"] == ["1"] and two.culprit["role"] == "stuck"


def test_a_rank_interrupted_outside_any_collective_is_the_one_stopped() -> None:
    r = report("[rank0]: step 3 loss 0.3\n" + INTERRUPT.replace("rank1", "rank0"))
    assert r.culprit is not None and r.culprit["ranks"] == ["0"] and r.culprit["role"] == "crashed"


def test_a_segfaulted_culprit_will_recur_and_a_killed_one_may_pass() -> None:
    seg = KILLED.replace("-9", "-11").replace("Signal 9 (SIGKILL)", "Signal 11 (SIGSEGV)")
    assert _diagnosis(KILLED).recurrence == "may-pass"
    assert _diagnosis(seg).recurrence == "will-recur"


def test_a_traceback_torchruns_agent_logged_is_no_ranks_exception() -> None:
    agent = "E0304 12:00:09.019000 552 torch/distributed/elastic/agent/server/api.py:1008] "
    assert x.exception(agent + "torch.distributed.DistNetworkError: Failed to recv, got 0 bytes.") is None
    assert x.exception("E0304 12:00:09.019000 552 train.py:88] ValueError: bad shard") == ("ValueError", "bad shard")


def test_the_one_peer_of_a_rank_that_lost_its_connection_in_a_world_of_two_went_away() -> None:
    r = report("[rank0]: process group ready: rank 0/2\n[rank0]: step 3 loss 0.3\n" + CLOSED)
    assert r.culprit_rule == "DL915" and r.culprit["ranks"] == ["1"] and r.culprit["role"] == "crashed"
    assert r.culprit.get("inferred") and r.causes[0].id == "rank-crash-deadlock"
    three = report("[rank0]: process group ready: rank 0/3\n[rank0]: step 3 loss 0.3\n" + CLOSED)
    assert three.culprit is None  # two peers could have gone: no naming
