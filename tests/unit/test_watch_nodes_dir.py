"""The agreement between the watchers of a multi-node job through a shared folder
(probes/watch/nodes.py) and the verdict over every node's capture (probes/watch/verdict.py), on a
temporary folder with a clock the tests move: which node of which run, markers, atomic writes,
the leader, a node that never answers, a folder that vanishes, one verdict per run."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from distdoctor.probes.watch.capture import write_part
from distdoctor.probes.watch.nodes import SharedDir, job_nodes, read_json, write_json
from distdoctor.probes.watch.verdict import agree, culprit_hosts, merge_nodes


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _node(root: Path, host: str, clock: Clock, node_rank: int | None, nnodes: int | None = 2,
          run: str = "10.0.0.1:29500/") -> SharedDir:
    node = SharedDir(root, host, node_rank=node_rank, nnodes=nnodes, run=run, now=clock)
    node.register()
    return node


@pytest.mark.parametrize("argv, env, want", [
    (["torchrun", "--nnodes", "2", "--node-rank", "1", "--master-addr=10.0.0.1", "--master-port=29500", "t.py"], {},
     (1, 2, "10.0.0.1:29500/")),
    (["torchrun", "--nnodes=1:4", "--rdzv-endpoint", "h:29400", "--rdzv-id", "42", "t.py"], {}, (None, 4, "h:29400/42")),
    ([], {"GROUP_RANK": "3", "GROUP_WORLD_SIZE": "4", "MASTER_ADDR": "h", "MASTER_PORT": "1",
          "TORCHELASTIC_RUN_ID": "r"}, (3, 4, "h:1/r")),
    ([], {"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "NODE_RANK": "1"}, (1, 2, "")),
    ([], {"GROUP_RANK": "0", "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1",
          "TORCHELASTIC_RUN_ID": "none"}, (0, 2, "h:1/")),  # what `run` reads from the launch line
    (["torchrun", "t.py"], {"SLURM_NODEID": "2", "SLURM_NNODES": "3", "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0"},
     (2, 3, "slurm:77.0")),
    (["python", "t.py"], {}, (None, None, "")),
])
def test_which_node_of_how_many_and_the_run(argv: list[str], env: dict[str, str], want: tuple) -> None:
    assert job_nodes(argv, env) == want


def test_atomic_writes_leave_no_temporary_file_and_bad_files_read_as_none(tmp_path: Path) -> None:
    assert write_json(tmp_path / "a.json", {"x": 1})
    assert read_json(tmp_path / "a.json") == {"x": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]
    assert not write_json(tmp_path / "gone" / "b.json", {"x": 1})  # no folder: False, nothing raised
    (tmp_path / "half.json").write_text('{"x": ')  # what a non-atomic writer could leave
    (tmp_path / "list.json").write_text("[1]")
    assert read_json(tmp_path / "half.json") is None and read_json(tmp_path / "list.json") is None
    assert read_json(tmp_path / "none.json") is None


def test_a_marker_from_another_node_of_this_run_makes_the_others_capture(tmp_path: Path) -> None:
    clock = Clock()
    a, b = _node(tmp_path, "a", clock, 0), _node(tmp_path, "b", clock, 1)
    other_run = _node(tmp_path, "c", clock, 0, run="10.0.0.9:29500/")
    assert a.marker() is None and b.marker() is None
    clock.sleep(30)
    a.mark("hang", clock.now - 10, ["0"])
    other_run.mark("failed", clock.now, ["5"])
    assert a.marker() is None  # its own marker is not news
    found = b.marker()
    assert found is not None and (found["host"], found["kind"], found["ranks"]) == ("a", "hang", ["0"])
    assert (tmp_path / "a" / "hang.json").is_file()


def test_an_earlier_runs_files_in_the_same_folder_are_not_this_runs(tmp_path: Path) -> None:
    clock = Clock()
    old = _node(tmp_path, "a", clock, 0)
    old.mark("hang", clock.now, ["0"])
    old.captured({"kind": "hang"})
    assert old.publish({"verdict": {"culprit": None}})
    clock.sleep(3600)  # the next run, in the same folder, same hosts
    b = _node(tmp_path, "b", clock, 1)
    assert b.marker() is None and b.captures() == {} and b.verdict() is None
    assert not (tmp_path / "verdict.json").exists()  # removed at registration: this run can publish
    a = _node(tmp_path, "a", clock, 0)
    assert not (tmp_path / "a" / "hang.json").exists()  # its own earlier marker is gone
    assert set(a.nodes()) == {"a", "b"}


def test_a_hang_needs_every_node_stalled(tmp_path: Path) -> None:
    clock = Clock()
    a, b = _node(tmp_path, "a", clock, 0), _node(tmp_path, "b", clock, 1)
    a.heartbeat(clock.now - 100, ["0"])
    b.heartbeat(clock.now - 2, ["1"])  # node b's rank computes (rank 0 waits for it)
    assert not a.others_stalled(20) and b.others_stalled(20)
    clock.sleep(25)
    assert a.others_stalled(20)  # b's watcher wrote nothing for a window: its last report stands
    b.heartbeat(clock.now, ["1"])
    assert a.others_stalled(20)  # the folder is read once a second at most: not yet seen
    clock.sleep(1)
    assert not a.others_stalled(20)
    assert a.last_progress() == clock.now - 1
    # b's last report: 15 s without progress. 6 s later that is 21 s ago, but b has not said
    # that nothing moved since: its window is not full, no hang yet
    clock.sleep(2)
    b.heartbeat(clock.now - 15, ["1"])
    clock.sleep(6)
    assert not a.others_stalled(20)
    clock.sleep(2)
    b.heartbeat(clock.now - 23, ["1"])
    clock.sleep(1)
    assert a.others_stalled(20)  # now it has


def test_the_leader_is_the_lowest_node_rank_then_the_host(tmp_path: Path) -> None:
    clock = Clock()
    nodes = [_node(tmp_path, h, clock, r, nnodes=3) for h, r in (("zeta", 0), ("alpha", None), ("mid", 1))]
    assert {n.leader() for n in nodes} == {"zeta"}
    late = _node(tmp_path, "beta", clock, None)
    assert late.leader() == "zeta"
    nodes[1].learn(0, 3)  # alpha learns its node rank from its ranks' GROUP_RANK: 0, a tie, the name decides
    assert {n.leader() for n in nodes} == {"alpha"}


def test_a_node_that_never_answers_is_named_after_a_bounded_wait(tmp_path: Path) -> None:
    clock = Clock()
    a, b = _node(tmp_path, "a", clock, 0, nnodes=3), _node(tmp_path, "b", clock, 1, nnodes=3)
    a.captured({"kind": "hang"})
    start = clock.now
    got, missing = a.wait_captures(timeout=10, sleep=clock.sleep)
    assert set(got) == {"a"} and missing == ["b", "node rank 2"]
    assert 10 <= clock.now - start <= 11
    b.captured({"kind": "hang"})
    got, missing = a.wait_captures(timeout=10, sleep=clock.sleep)
    assert set(got) == {"a", "b"} and missing == ["node rank 2"]
    a.nnodes = 2
    before = clock.now
    assert a.wait_captures(timeout=10, sleep=clock.sleep)[1] == [] and clock.now == before  # no wait when all are in


def test_one_verdict_per_run_whoever_is_first(tmp_path: Path) -> None:
    clock = Clock()
    a, b = _node(tmp_path, "a", clock, 0), _node(tmp_path, "b", clock, 1)
    assert b.wait_verdict(timeout=5, sleep=clock.sleep) is None
    assert a.publish({"verdict": {"culprit": {"ranks": ["1"]}}})
    assert not b.publish({"verdict": {"culprit": {"ranks": ["0"]}}})  # there already: not replaced
    assert b.verdict()["by"] == "a" and b.verdict()["verdict"]["culprit"]["ranks"] == ["1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "verdict.json"]  # no temporary left


def test_a_vanished_folder_makes_notes_never_an_error_or_a_wait(tmp_path: Path) -> None:
    clock = Clock()
    root = tmp_path / "shared"
    a = _node(root, "a", clock, 0)
    shutil.rmtree(root)
    a.heartbeat(clock.now, ["0"])
    a.mark("hang", clock.now, ["0"])
    a.captured({"kind": "hang"})
    assert a.marker() is None and a.captures() == {} and a.others_stalled(10)
    assert set(a.nodes()) == {"a"} and a.leader() == "a"
    before = clock.now
    got, missing = a.wait_captures(timeout=10, sleep=clock.sleep)
    assert (got, missing) == ({}, ["a", "node rank 1"]) and clock.now - before <= 11
    assert not a.publish({"verdict": {}}) and a.verdict() is None
    assert len(a.notes) == 3 and all(str(root) in n for n in a.notes)  # once per kind of file
    # the node's own evidence goes on: its folder is made again, or the part is left out
    assert write_part(a.own / "stacks.json", {"ranks": []}) == str(a.own / "stacks.json")
    (tmp_path / "file").write_text("")
    assert write_part(tmp_path / "file" / "stacks.json", {"ranks": []}) == ""


FRAMES_WAIT = [{"name": "all_reduce", "file": "/venv/torch/distributed/distributed_c10d.py", "line": 3252},
               {"name": "<module>", "file": "/job/train.py", "line": 12}]
FRAMES_SLEEP = [{"name": "<module>", "file": "/job/train.py", "line": 11}]


def _capture(root: Path, host: str, rank: str, frames: list[dict], clock: Clock, node_rank: int) -> SharedDir:
    node = _node(root, host, clock, node_rank)
    stacks = {"ranks": [{"rank": rank, "pid": 100 + node_rank, "host": host, "where": "", "frames": frames}]}
    write_json(node.own / "stacks.json", stacks)
    logs = node.own / "rank-logs" / "none_x" / "attempt_0" / "0"
    logs.mkdir(parents=True)
    (logs / "stderr.log").write_text(f"rank {rank} started\n")
    node.captured({"kind": "hang", "last_progress": clock.now - 5, "stacks": str(node.own / "stacks.json"),
                   "extra": [], "fr": [], "logs": {rank: [str(logs / "stderr.log")]},
                   "shared_logs": [], "local_ranks": {rank: "0"}})
    return node


def test_the_verdict_over_both_nodes_names_the_rank_and_its_host(tmp_path: Path) -> None:
    clock = Clock()
    a = _capture(tmp_path, "node-a", "0", FRAMES_WAIT, clock, 0)
    b = _capture(tmp_path, "node-b", "1", FRAMES_SLEEP, clock, 1)
    notes: list[str] = []
    merged = merge_nodes(a.captures(), a.own, notes)
    assert merged["hosts"] == {"0": "node-a", "1": "node-b"}
    assert merged["stacks"]["culprit"]["ranks"] == ["1"]
    # each node's local rank 0 log, linked under its global rank for the log reader
    assert sorted(Path(p).name for p in merged["logs"]) == ["rank0-stderr.log", "rank1-stderr.log"]
    assert Path(merged["logs"][1]).read_text() == "rank 1 started\n"
    doc, mine = agree(a, json.loads((a.own / "captured.json").read_text()), None, backend="gloo",
                      wait_s=5, notes=notes)
    assert mine is not None and doc["by"] == "node-a" and doc["missing"] == []
    assert doc["verdict"]["culprit"]["ranks"] == ["1"] and doc["verdict"]["culprit"]["host"] == "node-b"
    theirs, merged_b = agree(b, json.loads((b.own / "captured.json").read_text()), None, backend="gloo",
                             wait_s=5, notes=notes)
    assert merged_b is None and theirs["verdict"] == doc["verdict"]  # b reads the one verdict


def test_culprit_hosts() -> None:
    hosts = {"0": "a", "1": "b", "2": "b"}
    assert culprit_hosts({"ranks": ["1", "2"]}, hosts)["host"] == "b"
    assert culprit_hosts({"ranks": ["0", "1"]}, hosts)["host"] == "a, b"
    assert "host" not in culprit_hosts({"ranks": ["7"]}, hosts)
    assert culprit_hosts(None, hosts) is None


def test_ranks_numbered_on_each_node_are_never_taken_for_one_another(tmp_path: Path) -> None:
    """mp.spawn's children carry no RANK: both nodes call theirs rank 0. Neither is "rank 0"."""
    clock = Clock()
    a = _capture(tmp_path, "node-a", "0", FRAMES_WAIT, clock, 0)
    _capture(tmp_path, "node-b", "0", FRAMES_SLEEP, clock, 1)
    notes: list[str] = []
    merged = merge_nodes(a.captures(), a.own, notes)
    assert merged["hosts"] == {"0@node-a": "node-a", "0@node-b": "node-b"}
    assert merged["stacks"]["culprit"]["ranks"] == ["0@node-b"]
    assert merged["logs"] == []  # per-node numbers: no log is filed under a global rank
    assert any("numbered on each node" in n for n in notes)
