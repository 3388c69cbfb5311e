"""Mechanisms taught after the fifth measured batch (issue 21), each with a firing example and a
silent twin written from the message formats (NCCL's interface list and socket warnings, torch's
MapAllocator, Accelerate's and Megatron's own checks, the store-based barrier), never copied from
a case."""
from __future__ import annotations

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.diagnosis import IncidentEvidence, diagnose
from distdoctor.knowledge.logs import analyse_text

KB = load_knowledge(use_env=False)


def report(text: str, symptom: str | None = "error"):
    return analyse_text(text, KB, symptom=symptom)


def evidence(text: str, symptom: str | None = "error") -> list[str]:
    return [c.id for c in report(text, symptom).causes if c.basis == "evidence"]


def _diagnosis(text: str, symptom: str = "error"):
    return diagnose(KB, IncidentEvidence(symptom=symptom, logs=report(text, symptom).to_dict()))


# --- NCCL's interface list, wrapped one entry a line by a paste -------------------------------------------

def test_a_wrapped_interface_list_with_a_bridge_entry_is_the_interface_choice() -> None:
    text = ("node01:40211:40290 [0] NCCL INFO NET/Socket : Using\n[0]eth0:10.1.0.1<0>\n"
            "[1]br-0a1b2c3d4e5f:172.18.0.1<0>\n[2]veth9f8e7d6:fe80::a0b1:c2ff:fed3:e4f5%veth9f8e7d6<0>\n")
    assert report(text).causes[0].id == "nic-selection"


def test_a_wrapped_interface_list_of_real_nics_says_nothing() -> None:
    text = ("node01:40211:40290 [0] NCCL INFO NET/Socket : Using\n[0]eth0:10.1.0.1<0>\n"
            "[1]ib0:10.2.0.1<0>\n")
    assert "nic-selection" not in evidence(text)


# --- a socket of the picked interface's address family cannot be opened ------------------------------------

def test_socket_creation_refusing_the_address_family_is_the_interface_choice() -> None:
    text = ("node01:40211:40211 [0] NCCL INFO Bootstrap : Using eth0:fd00::1:2<0>\n"
            "node01:40211:40211 [0] misc/socket.cc:430 NCCL WARN Net : Socket creation failed : "
            "Address family not supported by protocol\n"
            "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.18.1\n")
    assert evidence(text)[:1] == ["nic-selection"]


def test_socket_creation_failing_on_the_descriptor_limit_is_not_the_interface() -> None:
    text = ("node01:40211:40211 [0] misc/socket.cc:430 NCCL WARN Net : Socket creation failed : Too many open files\n"
            "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.18.1\n")
    assert "nic-selection" not in evidence(text)
    assert report(text).causes[0].id == "other"


# --- opening a shared-memory object: the errno decides, not the wrapper -------------------------------------

def test_opening_a_shm_object_without_its_errno_is_no_answer() -> None:
    d = _diagnosis("RuntimeError: unable to open shared memory object </torch_40311_2718281828_3> in read-write mode\n")
    assert d.confidence == "unknown"


def test_opening_a_shm_object_past_the_descriptor_limit_is_the_limit() -> None:
    d = _diagnosis("RuntimeError: unable to open shared memory object </torch_40311_2718281828_3> in read-write "
                   "mode: Too many open files (24)\n")
    assert d.causes[0].id == "other"


def test_opening_a_shm_object_on_a_full_dev_shm_is_still_shm() -> None:
    d = _diagnosis("RuntimeError: unable to open shared memory object </torch_40311_2718281828_3> in read-write "
                   "mode: No space left on device (28)\n")
    assert d.causes[0].id == "shm-insufficient" and d.confident


# --- libraries' own checks that name the mechanism ---------------------------------------------------------

P2P_REFUSED = ("[rank0]: NotImplementedError: Using RTX 4000 series doesn't support faster communication broadband "
               "via P2P or IB. Please set `NCCL_P2P_DISABLE=\"1\"` and `NCCL_IB_DISABLE=\"1\" or use `accelerate "
               "launch` which will do this automatically.\n")


def test_accelerate_refusing_p2p_on_the_board_is_p2p() -> None:
    assert evidence(P2P_REFUSED)[:1] == ["p2p-unsupported"]


def test_another_not_implemented_error_is_not_p2p() -> None:
    assert "p2p-unsupported" not in evidence("[rank0]: NotImplementedError: Could not run 'aten::_foo' with "
                                             "arguments from the 'CPU' backend.\n")


def test_accelerate_shape_mismatch_is_an_asymmetric_collective() -> None:
    text = ("accelerate.utils.operations.DistributedOperationException: Cannot apply desired operation due to shape "
            "mismatches. All shapes across devices must be valid.\n\nOperation: `accelerate.utils.operations.gather`\n"
            "Input shapes:\n  - Process 0: [8, 120]\n  - Process 1: [8, 97]\n")
    assert evidence(text)[:1] == ["asymmetric-collective"]


def test_another_shape_error_is_not_a_collective() -> None:
    text = "RuntimeError: The size of tensor a (120) must match the size of tensor b (97) at non-singleton dimension 1\n"
    assert "asymmetric-collective" not in evidence(text)


def test_megatron_local_rank_assertion_is_the_rank_variables() -> None:
    text = ("  File \"/home/user/Megatron-LM/megatron/initialize.py\", line 201, in _initialize_distributed\n"
            "    assert args.local_rank == device, \\\n"
            "AssertionError: expected local-rank to be the same as rank % device-count.\n")
    assert evidence(text)[:1] == ["rank-env-mismatch"]


def test_another_assertion_on_local_rank_is_not_evidence() -> None:
    text = "AssertionError: local_rank must be an integer, got None\n"
    assert "rank-env-mismatch" not in evidence(text)


# --- torchrun's agent record is a launcher as its banner is: with mp.spawn in a worker, two launchers ------

AGENT = ("E1202 10:00:03.500000 40100 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: 1) "
         "local_rank: 0 (pid: 40111) of binary: /home/user/venv/bin/python3\n"
         "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n")


def test_a_torchrun_worker_that_calls_mp_spawn_is_two_launchers() -> None:
    text = ("[default0]:Traceback (most recent call last):\n"
            "[default0]:  File \"/home/user/job/train.py\", line 90, in <module>\n"
            "[default0]:    mp.spawn(worker, args=(cfg,), nprocs=2)\n"
            "[default0]:  File \"/home/user/venv/lib/python3.11/site-packages/torch/multiprocessing/spawn.py\", "
            "line 340, in spawn\n"
            "[default0]:torch.multiprocessing.spawn.ProcessRaisedException: \n"
            "[default0]:RuntimeError: Gloo connectFullMesh failed with [pair.h:311] Connect timeout [none]\n" + AGENT)
    assert report(text).causes[0].id == "mixed-launchers"


def test_a_torchrun_worker_whose_loader_uses_python_spawn_is_one_launcher() -> None:
    text = ("[default0]:Traceback (most recent call last):\n"
            "[default0]:  File \"/usr/lib/python3.11/multiprocessing/spawn.py\", line 122, in spawn_main\n"
            "[default0]:    exitcode = _main(fd, parent_sentinel)\n"
            "[default0]:RuntimeError: DataLoader worker (pid 40120) exited unexpectedly with exit code 1.\n" + AGENT)
    assert "mixed-launchers" not in evidence(text)


# --- more processes in the store-based barrier than the world size: two numberings in one rendezvous ------

def _barrier(world: int, count: int) -> str:
    return ("RuntimeError: Timed out initializing process group in store based barrier on rank: 1, for key: "
            f"store_based_barrier_key:1 (world_size={world}, worker_count={count}, timeout=0:30:00)\n")


SPAWNED = ("  File \"/home/user/venv/lib/python3.11/site-packages/torch/multiprocessing/spawn.py\", line 90, in _wrap\n"
           "    fn(i, *args)\n")


def test_a_barrier_counting_more_than_the_world_with_a_spawn_is_two_launchers() -> None:
    assert evidence(SPAWNED + _barrier(2, 4))[:1] == ["mixed-launchers"]
    assert evidence(_barrier(2, 4))[:1] == ["rank-env-mismatch"]


def test_a_barrier_counting_fewer_than_the_world_is_a_late_rank() -> None:
    for text in (SPAWNED + _barrier(4, 3), _barrier(4, 3)):
        assert not {"mixed-launchers", "rank-env-mismatch"} & set(evidence(text))


# --- c10::Error says where it was raised after its message: a Socket Timeout from the store's wait -------

def _socket_timeout(raised_from: str) -> str:
    return ("[rank1]: Traceback (most recent call last):\n"
            "[rank1]:   File \"/home/user/job/train.py\", line 40, in <module>\n"
            "[rank1]: RuntimeError: Socket Timeout\n"
            f"[rank1]: Exception raised from {raised_from} (most recent call first):\n")


def test_a_socket_timeout_raised_from_the_stores_wait_is_a_wait() -> None:
    r = report(_socket_timeout("doWait at ../torch/csrc/distributed/c10d/TCPStore.cpp:445"))
    assert "network-unreachable" not in [c.id for c in r.causes if c.basis == "evidence"]
    assert [c.id for c in r.causes if c.basis == "evidence"][:1] == ["collective-timeout"]


def test_a_socket_timeout_raised_from_a_connect_is_the_network() -> None:
    assert evidence(_socket_timeout("connect at ../torch/csrc/distributed/c10d/socket.cpp:612"))[:1] == \
        ["network-unreachable"]


# --- a pasted `nvidia-smi topo -m` is context: PCIe-only GPUs in a hang lead to P2P ------------------------

def _matrix(link: str) -> str:
    return ("        GPU0    GPU1    CPU Affinity    NUMA Affinity\n"
            f"GPU0     X      {link}    0-31            0\n"
            f"GPU1    {link}     X      0-31            0\n")


def test_a_pasted_pcie_only_matrix_in_a_hang_leads_to_p2p() -> None:
    causes = report("the first all_reduce never returns; both GPUs at 100%\n" + _matrix("PHB"), "hang").causes
    assert causes[0].id == "p2p-unsupported" and causes[0].basis == "facts"
    assert _diagnosis(_matrix("SYS"), "hang").confidence == "unknown"


def test_a_pasted_nvlink_matrix_says_nothing_of_p2p() -> None:
    causes = report("the first all_reduce never returns; both GPUs at 100%\n" + _matrix("NV4 "), "hang").causes
    assert "p2p-unsupported" not in [c.id for c in causes if c.basis != "prior"]
    assert "p2p-unsupported" not in [c.id for c in report(_matrix("PHB"), "error").causes if c.basis != "prior"]


# --- an error whose only failure lines are waits is a watchdog timeout (GUIDE 5, step 1) -------------------

WATCHDOG = ("[rank1]:[E1202 10:00:00.000000 40111 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=41, OpType=ALLGATHER, NumelIn=1, NumelOut=2, Timeout(ms)=600000) "
            "ran for 600094 milliseconds before timing out.\n")


def test_an_error_of_waits_alone_takes_the_watchdogs_priors() -> None:
    r = report(WATCHDOG)
    priors = [c.id for c in r.causes if c.basis == "prior"]
    assert "version-mismatch" not in priors[:3] and priors[:1] == ["rank-crash-deadlock"]


def test_an_error_with_a_failure_of_its_own_keeps_the_errors_priors() -> None:
    r = report(WATCHDOG + "[rank0]: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error, "
               "NCCL version 2.18.1\n[rank0]: ncclSystemError: System call (e.g. socket, malloc) or external library "
               "call failed or device error.\n")
    assert [c.id for c in r.causes if c.basis == "prior"][:1] == ["version-mismatch"]


# --- a JSON-lines record holding a whole traceback in one field ends with that traceback's exception --------

def _json_record(exc: str) -> str:
    return ('{"ts": "2026-12-02 10:00:09,144", "level": "CRITICAL", "rank": 0, "logger": "train", '
            '"msg": "uncaught exception", "exc": ' + exc + '}\n')


GLOO_WAIT = ('"Traceback (most recent call last):\\n  File \\"/home/user/job/train.py\\", line 194, in worker\\n'
             '    loss.backward()\\nRuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] '
             'Timed out waiting 8000ms for recv operation to complete\\n"')


def test_a_json_record_with_a_traceback_reads_as_its_last_line() -> None:
    from distdoctor.knowledge.logs import extract as x
    assert x.exception(_json_record(GLOO_WAIT).strip())[0] == "RuntimeError"
    assert x.exception(_json_record('"Traceback (most recent call last):\\nValueError: bad \\"q\\""').strip()) == \
        ("ValueError", 'bad "q"')


def test_the_one_rank_present_in_json_names_its_late_peer() -> None:
    text = ('{"ts": "2026-12-02 10:00:01,000", "level": "INFO", "rank": 0, "msg": "process group ready: rank 0/2"}\n'
            "epoch 0 step 2/6 loss 0.7225\n" + _json_record(GLOO_WAIT))
    r = analyse_text(text, KB, name="rank0.log", symptom="hang")
    assert r.culprit is not None and r.culprit["ranks"] == ["1"] and r.culprit.get("inferred")


def test_a_json_record_that_only_mentions_an_error_is_no_exception() -> None:
    from distdoctor.knowledge.logs import extract as x
    assert x.exception(_json_record('"retrying after RuntimeError: busy"').strip()) is None
    assert x.exception(_json_record('"see Traceback (most recent call last) in the docs"').strip()) is None


# --- a hang whose log stops in NCCL's P2P transport setup (its buffers, its proxy connections) -------------

def _setup_tail(transport: int) -> str:
    p = "node01:40211:40290 [1] NCCL INFO "
    return (p + "Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n" if transport else "") + (
        p + "Connection to proxy localRank 1 -> connection 0x7f5a30003300\n"
        + p + f"New proxy recv connection 11 from local rank 1, transport {transport}\n"
        + p + f"New proxy send connection 9 from local rank 1, transport {transport}\n")


def test_a_hang_that_stops_in_p2p_transport_setup_leads_to_p2p() -> None:
    text = _setup_tail(0) + "node01:40211:40290 [1] NCCL INFO transport/p2p.cc:449 Cuda Alloc Size 10485760 pointer 0x7f5a2c000000\n"
    assert report(text, "hang").causes[0].id == "p2p-unsupported"


def test_a_hang_that_stops_in_shm_transport_setup_is_not_p2p() -> None:
    assert "p2p-unsupported" not in [c.id for c in report(_setup_tail(1), "hang").causes if c.basis != "prior"]


# --- a script that spawns, with no launcher in sight, is one launch method -------------------------------

SPAWN_ONLY = ("Traceback (most recent call last):\n"
              "  File \"/home/user/job/train.py\", line 90, in <module>\n"
              "    mp.spawn(worker, args=(cfg,), nprocs=2)\n"
              "torch.multiprocessing.spawn.ProcessRaisedException: \n\n-- Process 1 terminated with the following error:\n"
              "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 30000ms "
              "for recv operation to complete\n")


def test_a_spawn_alone_is_no_ground_for_two_launchers() -> None:
    assert "mixed-launchers" not in [c.id for c in report(SPAWN_ONLY, "hang").causes if c.basis != "prior"]


def test_a_spawn_under_a_launcher_banner_still_is() -> None:
    banner = ("W1202 10:00:00.000000 40100 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable "
              "for each process to be 1 in default, to avoid your system being overloaded, please further tune the "
              "variable for optimal performance in your application as needed.\n")
    assert evidence(banner + SPAWN_ONLY, "hang")[:1] == ["mixed-launchers"]


# --- consumer boards named without the vendor (older drivers, CUDA samples' p2pBandwidthLatencyTest) -----

def _devices(model: str) -> str:
    return "".join(f"Device: {i}, {model}, pciBusID: {i + 2}, pciDeviceID: 0, pciDomainID:0\n" for i in range(2))


def test_geforce_boards_listed_without_the_vendor_in_a_hang_lead_to_p2p() -> None:
    causes = report(_devices("GeForce GTX 1080 Ti"), "hang").causes
    assert causes[0].id == "p2p-unsupported" and causes[0].basis == "facts"


def test_nvlink_boards_listed_the_same_way_say_nothing_of_p2p() -> None:
    causes = report(_devices("Tesla V100-SXM2-16GB"), "hang").causes
    assert "p2p-unsupported" not in [c.id for c in causes if c.basis != "prior"]


# --- rank 0 hosts the env:// store: in a world of two, the client that never arrived is rank 1 -----------

def _store(joined: str) -> str:
    return (f"torch.distributed.DistStoreError: Timed out after 31 seconds waiting for clients. {joined} clients joined.\n"
            "[E1202 10:00:30.000000000 socket.cpp:1028] [c10d] The client socket has timed out after 30000ms while "
            "trying to connect to (10.1.0.1, 29501).\n")


def test_the_store_client_that_never_arrived_in_a_world_of_two_is_rank_1() -> None:
    r = report(_store("1/2"))
    assert r.culprit is not None and r.culprit["ranks"] == ["1"] and r.culprit.get("inferred")
    assert r.causes[0].id == "master-addr-port"


def test_a_bigger_world_or_torchrun_names_no_store_client() -> None:
    assert report(_store("3/4")).culprit is None
    agent = ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n")
    assert report(_store("1/2") + agent).culprit is None


# --- the root of a timed-out broadcast: rank 0 by default ------------------------------------------------

def _bcast_timeout(rank: int, op: str) -> str:
    return (f"[rank{rank}]:[E1202 10:30:00.000000000 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum=812, OpType={op}, NumelIn=4096, NumelOut=4096, Timeout(ms)=1800000) "
            "ran for 1800071 milliseconds before timing out.\n")


def test_waiters_of_a_broadcast_name_rank_0_and_leave_both_readings_open() -> None:
    text = _bcast_timeout(2, "BROADCAST") + _bcast_timeout(3, "BROADCAST")
    r = report(text)
    assert r.culprit is not None and r.culprit["ranks"] == ["0"] and r.culprit.get("inferred")
    assert {c.id for c in r.causes[:2]} == {"collective-timeout", "rank0-overload"}
    assert _diagnosis(text).confidence == "unknown"


def test_an_all_reduce_or_rank_0_in_the_broadcast_names_no_root() -> None:
    assert report(_bcast_timeout(2, "ALLREDUCE") + _bcast_timeout(3, "ALLREDUCE")).culprit is None
    both = report(_bcast_timeout(0, "BROADCAST") + _bcast_timeout(3, "BROADCAST"))
    assert both.culprit is None or both.culprit["ranks"] != ["0"]


def test_a_subgroups_broadcast_names_no_root() -> None:
    """A broadcast in a subgroup (tensor-parallel data, a pipeline stage) takes the group's root,
    which is rank 0 only by chance: the watchdog's `[PG ID 2 ...]` keeps DL917 silent."""
    def in_group(rank: int, pg: int) -> str:
        return _bcast_timeout(rank, "BROADCAST").replace(
            f"[Rank {rank}] Watchdog", f"[PG ID {pg} PG GUID {pg} Rank {rank}] Watchdog")
    assert report(in_group(2, 2) + in_group(3, 2)).culprit is None
    named = report(in_group(2, 0) + in_group(3, 0)).culprit  # the default group (PG ID 0): its twin
    assert named is not None and named["ranks"] == ["0"] and named.get("inferred")
