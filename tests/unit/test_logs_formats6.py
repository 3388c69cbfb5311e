"""Signatures taught after the sixth measured batch (issue 21), each with a firing example and a
silent twin written from the message formats (the kernel's PCIe AER lines, RCCL's kernel command
line check, the NVIDIA fabric manager's version check), never copied from a case."""
from __future__ import annotations

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.logs import analyse_text

KB = load_knowledge(use_env=False)


def evidence(text: str, symptom: str | None = "hang") -> list[str]:
    return [c.id for c in analyse_text(text, KB, symptom=symptom).causes if c.basis == "evidence"]


def test_a_fatal_pcie_error_on_the_gpu_is_a_hardware_fault() -> None:
    text = ("[Mon Jan  8 03:12:44 2024] pcieport 0000:40:01.1: AER: Uncorrected (Fatal) error received: 0000:40:01.1\n"
            "[Mon Jan  8 03:12:44 2024] pcieport 0000:40:01.1: PCIe Bus Error: severity=Uncorrected (Fatal), "
            "type=Transaction Layer, (Receiver ID)\n"
            "[Mon Jan  8 03:12:45 2024] nvidia 0000:41:00.0: AER: can't recover (no error_detected callback)\n")
    assert evidence(text)[:1] == ["gpu-hardware-fault"]


def test_corrected_pcie_errors_say_nothing() -> None:
    text = ("[Mon Jan  8 03:12:44 2024] pcieport 0000:40:01.1: AER: Corrected error received: 0000:41:00.0\n"
            "[Mon Jan  8 03:12:44 2024] pcieport 0000:40:01.1: PCIe Bus Error: severity=Corrected, "
            "type=Physical Layer, (Receiver ID)\n")
    assert "gpu-hardware-fault" not in evidence(text)


def test_rccl_without_iommu_passthrough_points_at_peer_to_peer() -> None:
    text = ('gpu7:1201:1201 [0] /src/rccl/src/init.cc:180 NCCL WARN Missing "iommu=pt" from kernel command line\n'
            "gpu7:1201:1201 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.7<0>\n")
    assert evidence(text)[:1] == ["p2p-unsupported"]


def test_rccl_init_lines_alone_say_nothing_of_peer_to_peer() -> None:
    text = ("gpu7:1201:1201 [0] NCCL INFO RCCL version : 2.20.5-HEAD:abc1234\n"
            "gpu7:1201:1201 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.7<0>\n")
    assert "p2p-unsupported" not in evidence(text)


def test_a_fabric_manager_of_another_version_than_the_driver_is_a_version_mismatch() -> None:
    text = ("nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
            "     Active: failed (Result: exit-code)\n"
            "fabric manager NVIDIA GPU driver interface version 535.161.08 don't match with driver version "
            "535.129.03. Please update with matching NVIDIA driver package.\n")
    assert evidence(text)[:1] == ["version-mismatch"]


def test_a_fabric_manager_that_runs_says_nothing() -> None:
    text = ("nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
            "     Active: active (running) since Mon 2024-01-08 03:00:01 UTC\n"
            "Successfully configured all the available NVSwitches to route GPU NVLink traffic.\n")
    assert "version-mismatch" not in evidence(text)


# --- the launcher's "first failure" when every process only waited ------------------------------------------

PLAIN_TORCHRUN_END = """E0101 10:00:09.100000 700 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: 1) local_rank: 0 (pid: 701) of binary: /usr/bin/python3
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
Failures:
[1]:
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 702)
Root Cause (first observed failure):
[0]:
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 701)
"""
STORE_WAIT = """Traceback (most recent call last):
  File "/job/train.py", line 40, in <module>
    dist.init_process_group("gloo", rank=rank, world_size=world)
torch.distributed.DistStoreError: wait timeout after 30000ms, keys: /default_pg/0//cpu//0/2
"""


def test_exit_records_of_processes_that_only_waited_name_no_culprit() -> None:
    rep = analyse_text(STORE_WAIT + STORE_WAIT + PLAIN_TORCHRUN_END, KB, symptom="hang")
    assert rep.culprit is None
    assert rep.causes[0].id == "rank-env-mismatch"
    crash = next(c for c in rep.causes if c.id == "rank-crash-deadlock")
    assert not {"DL101", "DL102"} & set(crash.rules)  # the exit records are the waiters' own


def test_a_process_that_raised_of_its_own_leaves_the_launcher_s_first_failure_named() -> None:
    own = 'Traceback (most recent call last):\n  File "/job/train.py", line 12, in <module>\nValueError: bad config\n'
    rep = analyse_text(own + STORE_WAIT + PLAIN_TORCHRUN_END, KB, symptom="hang")
    assert rep.culprit is not None and rep.culprit["ranks"] == ["0"]


# --- torchrun's role prefix is the local rank, torch's [rankN]: the global one -------------------------------

def test_on_a_second_node_the_global_rank_after_the_local_prefix_names_the_rank() -> None:
    """node 1 of --nnodes 2 --nproc-per-node 2: its local rank 0 is global rank 2."""
    text = ("[default0]:epoch 0 step 3/10 loss 0.52\n"
            "[default0]:[rank2]: Traceback (most recent call last):\n"
            '[default0]:[rank2]:   File "/job/train.py", line 60, in <module>\n'
            "[default0]:[rank2]: ValueError: label 11 out of range\n")
    rep = analyse_text(text, KB, symptom="error")
    assert rep.culprit is not None and rep.culprit["ranks"] == ["2"]


def test_on_one_node_the_local_prefix_is_the_rank() -> None:
    text = ("[default1]:epoch 0 step 3/10 loss 0.52\n"
            '[default1]:  File "/job/train.py", line 60, in <module>\n'
            "[default1]:ValueError: label 11 out of range\n")
    rep = analyse_text(text, KB, symptom="error")
    assert rep.culprit is not None and rep.culprit["ranks"] == ["1"]


def _node_console(first_global: int) -> str:
    """One node's torchrun --tee console, 2 workers: local rank 1 raises, the agent's summary at
    the end gives each local rank's global rank."""
    g0, g1 = first_global, first_global + 1
    return ("[default0]:epoch 0 step 3/10 loss 0.52\n"
            "[default1]:epoch 0 step 3/10 loss 0.55\n"
            "[default1]:Traceback (most recent call last):\n"
            '[default1]:  File "/job/train.py", line 60, in <module>\n'
            "[default1]:ValueError: label 11 out of range\n"
            "[default0]:RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer\n"
            "E0101 10:00:05.000000 900 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: 1) "
            "local_rank: 1 (pid: 902) of binary: /usr/bin/python3\n"
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
            "Failures:\n[0]:\n"
            f"  rank      : {g0} (local_rank: 0)\n  exitcode  : 1 (pid: 901)\n"
            "Root Cause (first observed failure):\n[1]:\n"
            f"  rank      : {g1} (local_rank: 1)\n  exitcode  : 1 (pid: 902)\n")


def test_a_second_node_s_local_prefixes_are_read_as_its_summary_s_global_ranks() -> None:
    rep = analyse_text(_node_console(2), KB, symptom="error")
    assert rep.culprit is not None and rep.culprit["ranks"] == ["3"]
    assert set(rep.timeline) == {"2", "3"}


def test_on_the_first_node_the_summary_changes_nothing() -> None:
    rep = analyse_text(_node_console(0), KB, symptom="error")
    assert rep.culprit is not None and rep.culprit["ranks"] == ["1"]
    assert set(rep.timeline) == {"0", "1"}


def test_the_summary_is_read_from_a_file_s_end_before_its_lines(tmp_path) -> None:
    from distdoctor.knowledge.logs import analyse
    path = tmp_path / "node1" / "console.log"
    path.parent.mkdir()
    path.write_text("[default0]:warming up\n" * 3000 + _node_console(2), encoding="utf-8")
    rep = analyse([str(path)], KB, symptom="error")
    assert rep.culprit is not None and rep.culprit["ranks"] == ["3"]


def test_two_nodes_summaries_in_one_file_map_nothing() -> None:
    rep = analyse_text(_node_console(0) + _node_console(2), KB, symptom="error")
    assert rep.culprit is not None and rep.culprit["ranks"] == ["1"]
