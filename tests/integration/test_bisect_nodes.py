"""`bisect --nodes` (issue 26): the search over node subsets, one change at a time, on fakes;
and for real on network namespaces as nodes, one of them behind a throttled link."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence

import pytest

from distdoctor.probes.fleet.hosts import expand_hosts
from distdoctor.probes.repro.nodes import Node, NodesInputError, isolate, launch_argv, parse_nodes
from distdoctor.tui.cli import main


def fake(bad_nodes: set[str] = frozenset(), bad_links: set[str] = frozenset(), needs_all: int = 0):
    """A cluster where a node in bad_nodes fails any run it is in, and one in bad_links fails any
    run with another node; needs_all: the whole set fails only at that size."""
    def run(subset: Sequence[Node]) -> tuple[bool, list]:
        names = {n.name for n in subset}
        fails = bool(names & bad_nodes) or (len(names) > 1 and bool(names & bad_links)) \
            or (needs_all and len(names) >= needs_all)
        return not fails, [{"node": n} for n in names]
    return run


NODES = [Node(f"n{i}", f"10.0.0.{i}") for i in range(1, 5)]


def test_a_node_that_fails_alone_is_named() -> None:
    result = isolate(NODES, fake(bad_nodes={"n3"}))
    assert (result.verdict, result.suspects) == ("node", ["n3"])
    assert [r.nodes for r in result.runs] == [("n1", "n2", "n3", "n4"), ("n1",), ("n2",), ("n3",), ("n4",)]


def test_a_bad_link_is_found_by_pairs_with_a_reference() -> None:
    result = isolate(NODES, fake(bad_links={"n4"}))
    assert (result.verdict, result.suspects) == ("network", ["n4"])
    # each pair differs from a run that passed by one node only
    assert [r.nodes for r in result.runs[-3:]] == [("n1", "n2"), ("n1", "n3"), ("n1", "n4")]


def test_when_the_reference_is_the_bad_link_two_others_clear_it() -> None:
    result = isolate(NODES, fake(bad_links={"n1"}))
    assert (result.verdict, result.suspects) == ("network", ["n1"])
    assert result.runs[-1].nodes == ("n2", "n3") and result.runs[-1].passed


def test_a_passing_baseline_stops_at_once_and_scale_faults_are_inconclusive() -> None:
    assert isolate(NODES, fake()).verdict == "baseline-passes"
    assert len(isolate(NODES, fake()).runs) == 1
    assert isolate(NODES, fake(needs_all=3)).verdict == "inconclusive"


def test_launch_prefixes() -> None:
    argv = ["env", "A=1", "python3", "-c", "print('hi there')"]
    ssh = launch_argv("ssh", "gpu07", argv)
    assert ssh[:4] == ["ssh", "-o", "BatchMode=yes", "gpu07"] and len(ssh) == 5  # one string for the remote shell
    assert ssh[4] == "env A=1 python3 -c 'print('\"'\"'hi there'\"'\"')'"
    assert launch_argv("ip netns exec {host}", "ns1", argv) == ["ip", "netns", "exec", "ns1", *argv]
    assert launch_argv("srun", "gpu07", argv)[-6:-5] == ["gpu07"]


@pytest.mark.parametrize("text, why", [("a", "at least two"), ("a=10.0.0.1,a=10.0.0.2", "twice"), ("a=;b", "NAME"),
                                       ("-oProxyCommand=x,b", "NAME")])
def test_bad_node_lists(text: str, why: str) -> None:
    with pytest.raises(NodesInputError, match=why):
        parse_nodes(text, expand_hosts)
    assert [n.name for n in parse_nodes("gpu[01-03]", expand_hosts)] == ["gpu01", "gpu02", "gpu03"]


def _netns_usable() -> str:
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        return "needs root, ip and tc"
    probe = subprocess.run(["ip", "netns", "add", f"ddprobe{os.getpid()}"], capture_output=True)
    if probe.returncode:
        return "network namespaces are not allowed here"
    subprocess.run(["ip", "netns", "del", f"ddprobe{os.getpid()}"], capture_output=True)
    return ""


@pytest.fixture
def namespaces():
    """Three namespaces on one bridge (10.77.x.1-3/24); the third's link throttled to 8 kbit/s."""
    why = _netns_usable()
    if why:
        pytest.skip(why)
    p = f"dd{os.getpid() % 100000}"
    net = f"10.{77 + os.getpid() % 100}.0"
    cmds = [["ip", "link", "add", f"{p}br", "type", "bridge"], ["ip", "link", "set", f"{p}br", "up"]]
    for i in (1, 2, 3):
        cmds += [["ip", "netns", "add", f"{p}n{i}"],
                 ["ip", "link", "add", f"{p}v{i}", "type", "veth", "peer", "name", "dd0", "netns", f"{p}n{i}"],
                 ["ip", "link", "set", f"{p}v{i}", "master", f"{p}br"], ["ip", "link", "set", f"{p}v{i}", "up"],
                 ["ip", "-n", f"{p}n{i}", "addr", "add", f"{net}.{i}/24", "dev", "dd0"],
                 ["ip", "-n", f"{p}n{i}", "link", "set", "dd0", "up"], ["ip", "-n", f"{p}n{i}", "link", "set", "lo", "up"]]
    cmds.append(["ip", "netns", "exec", f"{p}n3", "tc", "qdisc", "add", "dev", "dd0", "root", "tbf",
                 "rate", "8kbit", "burst", "1540", "latency", "50ms"])
    try:
        for cmd in cmds:
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                pytest.skip(f"{' '.join(cmd)}: {done.stderr.strip()}")
        yield [f"{p}n{i}={net}.{i}" for i in (1, 2, 3)]
    finally:
        for i in (1, 2, 3):
            subprocess.run(["ip", "netns", "del", f"{p}n{i}"], capture_output=True)
        subprocess.run(["ip", "link", "del", f"{p}br"], capture_output=True)


@pytest.mark.slow
def test_namespaces_as_nodes_isolate_the_throttled_one(namespaces: list[str],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["bisect", "--nodes", ",".join(namespaces), "--launch", "ip netns exec {host}",
               "--python", sys.executable, "--backend", "gloo", "--timeout", "15",
               "--env", "GLOO_SOCKET_IFNAME=dd0", "--json"])
    data = json.loads(capsys.readouterr().out)
    third = namespaces[2].split("=")[0]
    assert rc == 1 and data["baseline_passed"] is False
    assert (data["verdict"], data["suspects"]) == ("network", [third]), data["runs"]
    alone = [r for r in data["runs"] if len(r["nodes"]) == 1]
    assert len(alone) == 3 and all(r["passed"] for r in alone)  # each node is fine by itself


def test_a_session_keeps_it_and_its_report_renders(capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Recorded under its own kind: the switch bisection's readers never see a node verdict."""
    from distdoctor.probes.repro import nodes

    monkeypatch.setattr(nodes, "run_subset", lambda subset, **_: (len(subset) == 1 or "b" not in
                                                                  {n.name for n in subset}, []))
    rc = main(["bisect", "--nodes", "a=10.0.0.1,b=10.0.0.2,c=10.0.0.3", "--session", "nodes-1", "--json"])
    assert rc == 1 and json.loads(capsys.readouterr().out)["suspects"] == ["b"]
    assert main(["report", "nodes-1", "--format", "md"]) == 0
    text = capsys.readouterr().out
    assert "bisect-nodes" in text or "network" in text
