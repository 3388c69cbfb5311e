"""Issue 21: a rendezvous-store wait that gave up is a wait, and its keys name the late rank.
Examples written from the message formats (TCPStore.cpp's doWait: torch 2.x "wait timeout after
{ms}ms, keys: {k0, k1}", older torch's bare "Socket Timeout"; Gloo's stores' "Wait timeout for
key(s): [...]"), each with a silent twin; never copied from a case."""
from __future__ import annotations

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.diagnosis import IncidentEvidence, diagnose, symptom_priors
from distdoctor.knowledge.logs import analyse_text, extract as x
from distdoctor.probes.topology import analyse as topo

KB = load_knowledge(use_env=False)


def _d(text: str, symptom: str = "hang"):
    rep = analyse_text(text, KB, symptom=symptom)
    return rep, diagnose(KB, IncidentEvidence(symptom=symptom, logs=rep.to_dict()))


def _wait(rank: int, keys: str) -> str:
    return (f"[rank{rank}]: Traceback (most recent call last):\n"
            f'[rank{rank}]:   File "/work/prep.py", line 41, in publish\n'
            f"[rank{rank}]: torch.distributed.DistStoreError: wait timeout after 30000ms, keys: {keys}\n")


ALIVE = "[rank1]: step 3 loss 2.3030\n[rank1]: step 4 loss 2.3040\n"


def test_a_key_that_names_one_rank_names_the_late_rank() -> None:
    rep, d = _d(ALIVE + _wait(0, "/ready/rank1"))
    assert rep.culprit_rule == "DL911"
    assert d.culprit["ranks"] == ["1"] and d.culprit["role"] == "stuck" and not d.culprit.get("inferred")
    assert d.causes[0].id == "collective-timeout" and d.confident


def test_a_whole_group_list_names_the_rank_left_by_elimination_likely_at_most() -> None:
    keys = "/shards/rank0, /shards/rank1, /shards/rank2"
    rep, d = _d(ALIVE + _wait(0, keys) + _wait(2, keys))
    assert d.culprit["ranks"] == ["1"] and d.culprit["inferred"] is True
    assert d.causes[0].id == "collective-timeout"
    assert d.confidence == "likely"  # never confirmed: the naming is an inference
    # the rank was seen running: "a rank never arrived" is argued against, not evidence
    assert "rank-env-mismatch" not in {r.id for r in d.causes if r.basis == "evidence"}


def test_silent_twin_a_whole_group_list_with_the_rank_left_absent_names_nobody() -> None:
    keys = "/shards/rank0, /shards/rank1, /shards/rank2"
    rep, d = _d(_wait(0, keys) + _wait(2, keys))  # rank 1's log is not in the excerpt
    assert rep.culprit is None and d.confidence == "unknown"
    assert any("/shards/rank1" in c and "every rank" in c for c in d.collect)


def test_silent_twin_keys_that_name_no_rank_say_what_to_collect() -> None:
    rep, d = _d(ALIVE + _wait(0, "/default_pg/0//cuda//0"))
    assert rep.culprit_rule != "DL911"
    assert any("/default_pg/0//cuda//0" in c for c in d.collect) or rep.culprit is not None


def test_silent_twin_every_named_rank_waited_too() -> None:
    rep, _d2 = _d(_wait(0, "/ready/rank1") + _wait(1, "/ready/rank0"))
    assert rep.culprit_rule != "DL911"


def test_gloo_store_wait_names_the_rank_too() -> None:
    text = ALIVE + "[rank0]: RuntimeError: [enforce fail at gloo/rendezvous/file_store.cc:130] Wait timeout for key(s): [rank_1]\n"
    rep, d = _d(text)
    assert rep.culprit_rule == "DL911" and d.culprit["ranks"] == ["1"]


SOCKET = ("[rank1]: Traceback (most recent call last):\n"
          '[rank1]:   File "/work/train.py", line 30, in main\n'
          "[rank1]:     value = store.get(\"config\")\n"
          "[rank1]: RuntimeError: Socket Timeout\n")


def test_a_socket_timeout_raised_from_a_store_get_is_a_wait_not_a_network_fault() -> None:
    rep, _d2 = _d(SOCKET, "error")
    assert "network-unreachable" not in {c.id for c in rep.causes if c.basis == "evidence"}
    assert rep.timeline["1"]["end"]["kind"] == "timeout"


def test_silent_twin_a_socket_timeout_with_no_store_frame_stays_a_network_lead() -> None:
    text = SOCKET.replace('[rank1]:     value = store.get("config")\n', "[rank1]:     sock.connect(addr)\n")
    rep, _d2 = _d(text, "error")
    assert "network-unreachable" in {c.id for c in rep.causes if c.basis == "evidence"}


# structured logging: the rank is a key=value tag inside the line, not a launcher prefix
def _tagged(rank: int, n: int) -> str:
    return f"2026-12-01 10:00:0{rank},000 INFO rank={rank} epoch 0: {n} batches\n"


GLOO_TIMEOUT = ("[rank0]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/"
                "tcp/unbound_buffer.cc:78] Timed out waiting 10000ms for recv operation to complete\n")


def test_rank_tags_inside_the_line_name_the_rank_of_uneven_shards() -> None:
    rep, _d2 = _d(_tagged(0, 32) + _tagged(1, 28) + GLOO_TIMEOUT)
    assert set(rep.timeline) >= {"0", "1"}
    uneven = next(c for c in rep.causes if c.id == "asymmetric-collective")
    assert "DL407" in uneven.rules and uneven.basis == "evidence"
    assert rep.culprit is not None and rep.culprit["ranks"] == ["0"]  # more batches: it kept calling


def test_silent_twin_one_rank_tagged_makes_no_comparison() -> None:
    rep, _d2 = _d(_tagged(0, 32) + GLOO_TIMEOUT)
    assert "DL407" not in {r for c in rep.causes for r in c.rules}


def test_silent_twin_a_file_of_one_rank_wins_over_a_tag_in_its_text() -> None:
    text = ('Traceback (most recent call last):\n  File "/work/train.py", line 9, in main\n'
            "ValueError: invalid rank: 5 (world size 2)\n")
    rep = analyse_text(text, KB, name="job-rank1.log", symptom="error")
    assert set(rep.timeline) == {"1"}


def test_silent_twin_local_rank_and_nranks_are_not_the_line_s_rank() -> None:
    assert x.who("INFO local_rank=1 nranks=8 group_rank=2 ready").rank is None
    assert x.who("INFO rank=3 ready").rank == "3" and x.who("INFO {'rank': 2, 'step': 4}").rank is None
    assert x.who("INFO [host1] rank: 5 | step 7").rank == "5"


# A rule never points at rank 0 against a culprit the evidence names (issue 21: DL204/DL205 did)
UNEVEN_ABORT = ("[rank0]: 80 records, 10 batches\n[rank1]: 88 records, 11 batches\n"
                "[rank0]: Running tokenizer on dataset:  45%|####5     | 450000/1000000\n"
                "[rank0]: step 10 loss 2.3100\n[rank1]: step 10 loss 2.3200\n"
                "[rank1]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection "
                "closed by peer [10.0.0.2]:47510\n"
                "[0]:\n  time      : 2026-12-01_10:00:30\n  host      : node01\n  rank      : 0 (local_rank: 0)\n"
                "  exitcode  : -6 (pid: 4000)\n")


def test_no_rank0_rule_against_the_uneven_inputs_culprit() -> None:
    rep, d = _d(UNEVEN_ABORT, "error")
    assert rep.culprit["ranks"] == ["1"]  # 11 batches: it kept calling collectives
    assert not {r for c in rep.causes if c.id == "rank0-overload" for r in c.rules}
    assert d.causes[0].id == "asymmetric-collective"


def test_silent_twin_with_no_named_culprit_rank0_never_timing_out_is_still_a_lead() -> None:
    text = ("[rank0]: step 500 loss 2.8000\n[rank1]: step 500 loss 2.8100\n"
            "[rank1]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
            "Timed out waiting 10000ms for recv operation to complete\n"
            "[rank2]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
            "Timed out waiting 10000ms for recv operation to complete\n")
    rep, _d2 = _d(text)
    assert "DL204" in {r for c in rep.causes if c.id == "rank0-overload" for r in c.rules}


# Rank 0 late past the timeout with no rank-0-only work in its lines: named, likely at most
def _watchdog(rank: int) -> str:
    return (f"[rank{rank}]:[E1129 10:40:00.00{rank}000000 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) "
            f"Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=BROADCAST, "
            "NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.\n")


def test_rank0_present_and_never_timing_out_is_named_late_but_never_confirmed() -> None:
    text = "[rank0]: step 40 loss 2.3400\n[rank1]: step 40 loss 2.3500\n[rank2]: step 40 loss 2.3600\n"
    rep, d = _d(text + _watchdog(1) + _watchdog(2))
    assert d.culprit["ranks"] == ["0"] and d.culprit.get("inferred") is True
    assert d.confidence != "confirmed"
    assert d.causes[0].id == "collective-timeout"  # no line of rank-0-only work: no rank0-overload evidence


def test_silent_twin_rank0_in_its_eval_is_rank0_overload_and_may_be_confirmed() -> None:
    text = ("[rank0]: step 40 loss 2.3400\n[rank1]: step 40 loss 2.3500\n[rank2]: step 40 loss 2.3600\n"
            "[rank0]: running evaluation on 5000 validation samples\n")
    rep, d = _d(text + _watchdog(1) + _watchdog(2))
    assert d.culprit["ranks"] == ["0"] and not d.culprit.get("inferred")
    assert d.causes[0].id == "rank0-overload"


def test_the_rank_absent_from_every_timeout_is_named_by_elimination() -> None:
    text = ("[rank1]: Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/3\n"
            "[rank2]: Initializing distributed: GLOBAL_RANK: 2, MEMBER: 3/3\n")
    rep, d = _d(text + _watchdog(1) + _watchdog(2))
    assert rep.culprit_rule == "DL912" and d.culprit["ranks"] == ["0"] and d.confidence == "likely"


def test_silent_twin_two_ranks_unaccounted_for_name_nobody() -> None:
    text = ("[rank1]: Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/4\n"
            "[rank2]: Initializing distributed: GLOBAL_RANK: 2, MEMBER: 3/4\n")
    rep, d = _d(text + _watchdog(1) + _watchdog(2))
    assert rep.culprit is None and d.confidence == "unknown"


# Resumes: each rank announces where it resumed; ranks that disagree loaded different states
def _resumes(*points: str) -> str:
    return "".join(f"[rank{r}]: {p}\n" for r, p in enumerate(points))


def test_the_odd_resume_point_names_the_rank_in_any_phrasing() -> None:
    text = _resumes("Restored all states from the checkpoint at ck/epoch=3-step=1200.ckpt",
                    "Restored all states from the checkpoint at ck/epoch=3-step=1200.ckpt",
                    "Restored all states from the checkpoint at ck/epoch=2-step=800.ckpt")
    rep, d = _d(text, "error")
    assert rep.culprit_rule == "DL913" and d.culprit["ranks"] == ["2"]
    div = next(c for c in rep.causes if c.id == "checkpoint-state-divergence")
    assert "DL603" in div.rules and div.basis == "evidence"


def test_megatron_iterations_that_differ_on_two_ranks_weigh_divergence_without_an_odd_one() -> None:
    text = _resumes(" loading checkpoint from /ckpt at iteration 500", " loading checkpoint from /ckpt at iteration 400")
    rep, _d2 = _d(text, "error")
    assert "DL603" in next(c.rules for c in rep.causes if c.id == "checkpoint-state-divergence")
    assert rep.culprit_rule != "DL913"  # 1:1: which one is odd cannot be told


def test_silent_twin_ranks_that_agree_or_one_rank_announcing() -> None:
    for text in (_resumes("resumed at epoch 3, step 1200", "resumed at epoch 3, step 1200"),
                 _resumes("resumed at epoch 3, step 1200"),
                 _resumes("resumed at epoch 3", "resuming from step 1200")):  # different fields: no contradiction
        rep, _d2 = _d(text, "error")
        assert "DL603" not in {r for c in rep.causes for r in c.rules} and rep.culprit_rule != "DL913"


# Where the logs stop picks the place in the run for an error too; it weighs priors, never evidence
INIT_ERROR = ("[rank1]: Traceback (most recent call last):\n"
              '[rank1]:   File "/work/train.py", line 12, in main\n'
              "[rank1]:     dist.init_process_group(backend=\"gloo\")\n"
              '[rank1]:   File "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", line 1520, in '
              "init_process_group\n"
              "[rank1]: ValueError: bad value in the job's config file\n")


def test_an_error_at_init_is_shown_as_init_and_weighs_the_setup_causes() -> None:
    rep, d = _d(INIT_ERROR, "error")
    assert rep.stage == "init" and d.stage == "init" and d.to_dict()["stage"] == "init"
    setup = [cid for cid, c in KB.causes.items() if getattr(c, "setup", False)]
    staged = symptom_priors(KB, "error", "init")
    assert setup and all(staged[cid] >= 0.75 for cid in setup)
    assert symptom_priors(KB, "hang", "init") == symptom_priors(KB, "hang")  # errors only


def test_silent_twin_the_same_error_mid_training_leaves_the_priors_alone() -> None:
    text = "[rank1]: step 40 loss 2.3400\n" + INIT_ERROR.replace("dist.init_process_group(backend=\"gloo\")",
                                                                 "batch = next(it)").replace(
        '[rank1]:   File "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", line 1520, in '
        "init_process_group\n", "")
    rep, d = _d(text, "error")
    assert rep.stage == "mid-training" and d.stage == "mid-training"
    assert symptom_priors(KB, "error", d.stage) == symptom_priors(KB, "error")


def test_the_stage_is_never_evidence() -> None:
    rep = analyse_text(INIT_ERROR, KB, symptom="error")
    plain = {c.id for c in rep.causes if c.basis == "evidence"}
    assert "master-addr-port" not in plain and "mixed-launchers" not in plain


# A topology pasted with the log (parsed by probes/topology, the one parser) weighs p2p-unsupported
MATRIX = """        GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity
GPU0     X      PHB     SYS     SYS     0-15            0
GPU1    PHB      X      SYS     SYS     0-15            0
GPU2    SYS     SYS      X      PHB     16-31           1
GPU3    SYS     SYS     PHB      X      16-31           1
"""
NVLINK = MATRIX.replace("PHB", "NV4").replace("SYS", "NV4")
HANG = "[rank0]: step 12 loss 2.3120\n[rank1]: step 12 loss 2.3220\n"


def _with_topology(matrix: str, symptom: str):
    rep = analyse_text(HANG, KB, symptom=symptom)
    return diagnose(KB, IncidentEvidence(symptom=symptom, logs=rep.to_dict(), topology=topo(matrix)))


def test_a_pasted_matrix_of_host_links_in_a_hang_weighs_p2p_unsupported_as_a_fact() -> None:
    d = _with_topology(MATRIX, "hang")
    p2p = next(r for r in d.causes if r.id == "p2p-unsupported")
    assert p2p.basis == "facts" and any(r.startswith("topology:") and "SYS" in r for r in p2p.reasons)
    assert d.confidence == "unknown"  # a fact of the set-up never makes an answer


def test_silent_twin_nvlink_or_another_symptom_weighs_nothing() -> None:
    for matrix, symptom in ((NVLINK, "hang"), (MATRIX, "error")):
        d = _with_topology(matrix, symptom)
        assert not any(r.startswith("topology:") for c in d.causes for r in c.reasons)


def test_the_store_server_waiting_for_its_clients_says_to_collect_every_rank() -> None:
    text = ("[rank0]: torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. "
            "1/4 clients joined.\n")
    rep, d = _d(text, "hang")
    assert rep.culprit is None and d.confidence == "unknown"
    assert any("only 1 of 4 processes reached the store" in c for c in d.collect)


def test_silent_twin_a_named_culprit_needs_no_store_collect_line() -> None:
    rep, d = _d(ALIVE + _wait(0, "/ready/rank1"))
    assert rep.collect == [] and not any("reached the store" in c or "wrote its key" in c for c in d.collect)
