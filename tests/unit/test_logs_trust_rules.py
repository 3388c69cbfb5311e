"""Mechanisms of issue 21, each with a firing example and a silent twin written from the formats
(CPython's exception strings, torch's monitored barrier, torchrun's --tee prefix), never copied
from a case: the waiters name the late rank; generic exceptions that name a distributed resource;
quoted pastes; a crash is an answer only when others are seen waiting."""
from __future__ import annotations

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.diagnosis import IncidentEvidence, diagnose
from distdoctor.knowledge.logs import analyse_text

KB = load_knowledge(use_env=False)


def _d(text: str, symptom: str = "error"):
    rep = analyse_text(text, KB, symptom=symptom)
    return rep, diagnose(KB, IncidentEvidence(symptom=symptom, logs=rep.to_dict()))


# torch's ProcessGroupGloo::monitoredBarrier on rank 0, as torchrun --tee 3 prints it
MONITORED = ("[rank0]: RuntimeError: [Rank 0]: Rank 2 failed to pass monitoredBarrier in 10000 ms\n"
             "[rank0]:  Original exception: \n"
             "[rank0]: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
             "10000ms for recv operation to complete\n")


def test_the_waiters_name_the_late_rank_from_a_monitored_barrier() -> None:
    rep, d = _d(MONITORED, "hang")
    assert d.culprit["ranks"] == ["2"] and d.culprit["role"] == "stuck"  # not rank 0, which raised it
    assert rep.timeline["0"]["end"]["kind"] == "timeout"
    assert d.ranks["0"]["status"] == "timed-out"


def test_silent_twin_a_named_rank_that_crashed_on_its_own_is_the_crashed_culprit() -> None:
    text = MONITORED + "[rank2]: ValueError: corrupt shard at offset 4096\n"
    _rep, d = _d(text, "hang")
    assert d.culprit["ranks"] == ["2"] and d.culprit["role"] == "crashed"


def test_silent_twin_waitall_lists_every_late_rank() -> None:
    text = "[rank0]: RuntimeError: [Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 120000 ms\n"
    _rep, d = _d(text, "hang")
    assert d.culprit["ranks"] == ["1", "3"]


def test_a_missing_rank_variable_is_rank_env_mismatch() -> None:
    text = ('Traceback (most recent call last):\n  File "train.py", line 12, in <module>\n'
            '    local_rank = int(os.environ["LOCAL_RANK"])\nKeyError: \'LOCAL_RANK\'\n')
    _rep, d = _d(text)
    assert d.causes[0].id == "rank-env-mismatch" and d.causes[0].basis == "evidence"


def test_silent_twin_a_keyerror_on_another_name_is_no_rank_variable() -> None:
    _rep, d = _d("KeyError: 'learning_rate'\n")
    assert "rank-env-mismatch" not in {r.id for r in d.causes if r.basis == "evidence"}
    assert d.confidence == "unknown"  # one rank died, nobody is seen waiting: no deadlock shown


def test_enospc_from_shared_memory_code_is_shm() -> None:
    text = ('  File "/usr/lib/python3.11/multiprocessing/shared_memory.py", line 115, in __init__\n'
            "OSError: [Errno 28] No space left on device: '/psm_4f1c2a9e'\n")
    _rep, d = _d(text)
    assert d.causes[0].id == "shm-insufficient"


def test_silent_twin_enospc_on_a_data_disk_is_not_shm() -> None:
    _rep, d = _d("OSError: [Errno 28] No space left on device: '/data/ckpt/model.pt'\n")
    assert "shm-insufficient" not in {r.id for r in d.causes if r.basis == "evidence"}


def test_a_rank_s_missing_checkpoint_file_is_checkpoint_divergence() -> None:
    text = "[rank1]: FileNotFoundError: [Errno 2] No such file or directory: '/local/ckpt/step_500/rank_1.pt'\n"
    _rep, d = _d(text)
    assert d.causes[0].id == "checkpoint-state-divergence"


def test_silent_twin_a_missing_data_shard_is_no_checkpoint() -> None:
    text = "[rank1]: FileNotFoundError: [Errno 2] No such file or directory: '/data/train/shard_00001.bin'\n"
    _rep, d = _d(text)
    assert "checkpoint-state-divergence" not in {r.id for r in d.causes if r.basis == "evidence"}


def test_quote_prefixes_are_stripped() -> None:
    plain = "[rank1]: KeyError: 'RANK'\n[rank0]: RuntimeError: Connection closed by peer [10.1.0.2]:29500\n"
    quoted = "".join("> " + ln + "\n" for ln in plain.splitlines())
    a, da = _d(plain)
    b, db = _d(quoted)
    assert [c.id for c in da.causes] == [c.id for c in db.causes]
    assert da.culprit == db.culprit and db.culprit["ranks"] == ["1"]


def test_a_crash_with_a_waiter_is_an_answer_without_one_only_a_lead() -> None:
    crash = "[rank1]: ValueError: corrupt shard at offset 4096\n"
    waiter = "[rank0]: RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.1.0.2]:29500\n"
    _rep, alone = _d(crash)
    _rep, both = _d(crash + waiter)
    assert alone.confidence == "unknown" and alone.culprit["ranks"] == ["1"]
    assert both.confident and both.cause == "rank-crash-deadlock" and both.culprit["ranks"] == ["1"]


# Lightning's announcements (lightning/fabric/utilities/distributed.py, "Initializing distributed:
# GLOBAL_RANK: {rank}, MEMBER: {rank + 1}/{world}") and its end of fit ("`Trainer.fit` stopped:
# `max_epochs={n}` reached.")
RUN = ("Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\n"
       "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2\n"
       "Epoch 1: 100%|##########| 50/50 [00:05<00:00,  9.91it/s, v_num=0, train_loss=0.301]\n"
       "`Trainer.fit` stopped: `max_epochs=2` reached.\n")


def test_a_run_that_finished_then_started_again_in_one_console_is_two_runs() -> None:
    resumed = RUN + "Restoring states from the checkpoint path at /home/user/ckpt/last.ckpt\n" + RUN
    rep, d = _d(resumed, None)
    assert not d.failed and d.exit_code == 0
    assert "rank-env-mismatch" not in {c.id for c in rep.causes}


def test_silent_twin_every_rank_announced_twice_within_one_run_is_two_launches() -> None:
    twice = RUN.replace("`Trainer.fit` stopped: `max_epochs=2` reached.\n", "") + RUN
    rep, _d2 = _d(twice, None)
    assert rep.causes and rep.causes[0].id == "rank-env-mismatch"


# a launch line pasted with its log (torchrun's own argument names)
STORE_WAIT = ("torch.distributed.DistNetworkError: The client socket has timed out after 900000ms while trying to "
              "connect to (localhost, 29500).\n")


def test_a_pasted_launch_line_with_two_nodes_and_a_loopback_master_is_evidence() -> None:
    text = "+ torchrun --nnodes 2 --nproc-per-node 8 --node-rank 1 --master-addr localhost train.py\n" + STORE_WAIT
    _rep, d = _d(text)
    assert d.causes[0].id == "master-addr-port"
    assert any("launch-multinode-loopback-master" in r for c in _rep.causes for r in c.reasons)


@pytest.mark.parametrize("line", [
    "+ torchrun --nnodes 1 --nproc-per-node 8 --master-addr localhost train.py",
    "+ torchrun --nnodes 2 --nproc-per-node 8 --node-rank 1 --master-addr 10.1.0.1 train.py",
])
def test_silent_twin_one_node_or_a_routable_master(line: str) -> None:
    rep, _d2 = _d(line + "\n" + STORE_WAIT)
    assert not any("launch-multinode-loopback-master" in r for c in rep.causes for r in c.reasons)
