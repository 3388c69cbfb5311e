"""Network probe: NCCL/Gloo selection over recorded /sys trees, real sockets for MASTER_ADDR/PORT."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.evaluate import evaluate
from distdoctor.probes import netmaster, netsel
from distdoctor.probes.base import ProbeContext
from distdoctor.probes.netsel import IfAddr
from distdoctor.probes.network import probe_network

RECORDED = Path(__file__).parents[1] / "fixtures" / "probes" / "vm-docker"
RECORDED_ADDRS = json.loads((RECORDED / "net_if_addrs.json").read_text())
KB = load_knowledge(use_env=False)


def run(env: dict[str, str], root: Path = RECORDED, addrs: dict | None = None, **kw) -> dict:
    """The probe over a recorded root (recorded addresses), or over the real host (addrs=None)."""
    ctx = ProbeContext(root=root, env=env, timeout=5.0)
    if addrs is None and root == RECORDED:
        addrs = RECORDED_ADDRS
    result = probe_network(ctx, if_addrs=(lambda: addrs) if addrs is not None else None, **kw)
    assert result.status == "ok", result.reason
    return dict(result.facts)


def checks(env: dict[str, str], **kw) -> dict:
    ctx = ProbeContext(root=kw.pop("root", RECORDED), env=env, timeout=5.0)
    addrs = kw.pop("addrs", RECORDED_ADDRS)
    result = probe_network(ctx, if_addrs=lambda: addrs, **kw)
    return {f.check: f for f in evaluate(KB, {"network": result})}


def test_recorded_interfaces_in_ifindex_order() -> None:
    facts = run({})
    assert [(i["name"], i["state"], i["mtu"], i["type"]) for i in facts["interfaces"]] == [
        ("lo", "unknown", 65536, "loopback"), ("ifb0", "down", 1500, "ether"),
        ("ifb1", "down", 1500, "ether"), ("eth0", "up", 1400, "ether")]
    assert facts["interfaces"][3]["addresses"][0] == "192.0.2.2"
    assert facts["interfaces"][3]["speed_mbps"] is None  # virtio reports -1
    assert facts["rdma"] == []
    assert (facts["nccl_selected"], facts["nccl_rule"]) == (["eth0"], "default ('^docker,lo')")
    assert facts["suggested_ifname"] == "eth0"


ORDER = [IfAddr("lo", 4, "127.0.0.1"), IfAddr("eth0", 4, "10.0.0.2"), IfAddr("eth1", 4, "10.1.0.2"),
         IfAddr("docker0", 4, "172.17.0.1"), IfAddr("ib0", 4, "192.168.0.2"),
         IfAddr("lo", 6, "::1"), IfAddr("eth0", 6, "fe80::1%eth0")]


@pytest.mark.parametrize("spec,selected", [
    ("eth", ["eth0", "eth1"]),          # prefix
    ("eth0", ["eth0"]),
    ("=eth", []),                        # exact: no interface is called "eth"
    ("=eth1", ["eth1"]),
    ("^eth,docker", ["lo", "ib0"]),      # exclude prefixes; lo is not skipped for IPv4
    ("^=eth0", ["lo", "eth1", "docker0", "ib0"]),
    ("en", []),
    ("eth1:1234,ib", ["eth1", "ib0"]),   # ':port' is ignored for sockets
    ("^,", []),                          # an empty list matches all; '^' inverts that
    ("^", ["ib0"]),                      # one character: NCCL ignores it and uses its default
])
def test_nccl_socket_ifname_rules(spec: str, selected: list[str]) -> None:
    assert netsel.nccl_select(spec, ORDER)[0] == selected


def test_nccl_default_order_and_ignored_short_spec() -> None:
    assert netsel.nccl_select(None, ORDER) == (["ib0"], "default ('ib')")
    no_ib = [a for a in ORDER if a.name != "ib0"]
    assert netsel.nccl_select("e", no_ib) == (["eth0", "eth1"], "default ('^docker,lo')")
    only = [IfAddr("lo", 4, "127.0.0.1"), IfAddr("docker0", 4, "172.17.0.1"), IfAddr("lo", 6, "::1")]
    assert netsel.nccl_select(None, only) == (["docker0"], "default ('docker')")
    assert netsel.nccl_select(None, only[:1]) == (["lo"], "default ('lo')")
    assert netsel.nccl_select(None, only[2:]) == ([], "default (nothing found)")  # ::1 is skipped
    assert netsel.nccl_select("eth", ORDER, family=6)[0] == ["eth0"]


def test_ifname_matching_nothing_fails_with_a_working_suggestion() -> None:
    found = checks({"NCCL_SOCKET_IFNAME": "=eth"})
    assert found["socket-ifname-matches-nothing"].status == "fail"
    assert found["socket-ifname-matches-nothing"].fix == "export NCCL_SOCKET_IFNAME=eth0"
    assert "eth0 (up, 192.0.2.2" in found["socket-ifname-matches-nothing"].detail
    assert checks({"NCCL_SOCKET_IFNAME": "eth"})["socket-ifname-matches-nothing"].status == "ok"


def _docker_host(tmp_path: Path) -> Path:
    for name, index, kind in (("lo", 1, 772), ("docker0", 3, 1)):
        d = tmp_path / "sys/class/net" / name
        d.mkdir(parents=True)
        (d / "ifindex").write_text(f"{index}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "operstate").write_text("up\n")
        (d / "mtu").write_text("1500\n")
    return tmp_path


def test_default_pick_of_docker_warns(tmp_path: Path) -> None:
    addrs = {"lo": [{"family": "AF_INET", "address": "127.0.0.1", "netmask": "255.0.0.0"}],
             "docker0": [{"family": "AF_INET", "address": "172.17.0.1", "netmask": "255.255.0.0"}]}
    found = checks({}, root=_docker_host(tmp_path), addrs=addrs)
    assert found["default-nic-is-docker-or-lo"].status == "warn"
    assert found["default-nic-is-docker-or-lo"].title == "NCCL would use only docker0 (default ('docker'))"


def test_down_interface_selected_warns() -> None:
    addrs = {**RECORDED_ADDRS, "ifb0": [{"family": "AF_INET", "address": "10.9.0.1", "netmask": None}]}
    found = checks({"NCCL_SOCKET_IFNAME": "ifb"}, addrs=addrs)
    assert found["ifname-selects-down-interface"].status == "warn"
    assert found["ifname-selects-down-interface"].title.endswith(": ifb0")


def test_gloo_names_are_exact() -> None:
    facts = run({"GLOO_SOCKET_IFNAME": "eth0,eth,ifb0"})
    assert facts["gloo_selected"] == ["eth0"]
    assert facts["gloo_missing"] == ["eth", "ifb0"]  # ifb0 exists but has no address
    found = checks({"GLOO_SOCKET_IFNAME": "eth"})
    assert found["gloo-ifname-not-found"].status == "fail"
    assert "hostname-resolves-to-loopback" not in found  # GLOO_SOCKET_IFNAME is set


def test_hostname_resolving_to_loopback_warns_for_gloo() -> None:
    found = checks({}, resolver=lambda host: ["127.0.1.1"])
    assert found["hostname-resolves-to-loopback"].status == "warn"
    assert found["hostname-resolves-to-loopback"].fix == "export GLOO_SOCKET_IFNAME=eth0"
    assert checks({}, resolver=lambda host: ["192.0.2.2"])["hostname-resolves-to-loopback"].status == "ok"


def test_recorded_rdma_ports_down(tmp_path: Path) -> None:
    port = tmp_path / "sys/class/infiniband/mlx5_0/ports/1"
    port.mkdir(parents=True)
    (port / "state").write_text("1: DOWN\n")
    (port / "link_layer").write_text("InfiniBand\n")
    (port / "rate").write_text("100 Gb/sec (4X EDR)\n")
    facts = run({}, root=tmp_path, addrs={})
    assert facts["rdma"] == [{"name": "mlx5_0", "ports": [
        {"port": 1, "state": "DOWN", "link_layer": "InfiniBand", "rate": "100 Gb/sec (4X EDR)"}]}]
    assert facts["rdma_all_down"] is True


def test_hung_resolver_is_abandoned_at_the_deadline() -> None:
    release = threading.Event()

    def wedged(host: str) -> list[str]:
        release.wait(60)
        return ["10.0.0.1"]

    try:
        ips, why = netmaster.resolve("node0", 0.2, wedged)
    finally:
        release.set()
    assert (ips, why) == ([], "resolution timed out after 0.2s")


# --- integration: real sockets on this host ----------------------------------------------------

LISTENER = ("import socket, sys\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\n"
            "print(s.getsockname()[1], flush=True)\nsys.stdin.read()\n")


@pytest.fixture()
def listener():
    proc = subprocess.Popen([sys.executable, "-c", LISTENER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())  # the listener is up once it printed its port
    yield proc, port
    proc.communicate("", timeout=30)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_port_held_by_a_real_listener_names_its_pid(listener) -> None:
    proc, port = listener
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    facts = run(env, root=Path("/"), addrs=None)
    assert facts["master_port_in_use"] is True
    assert facts["master_port_holder_pid"] == proc.pid
    assert facts["master_connect"] == "ok"
    found = checks(env, root=Path("/"), addrs={})
    assert found["master-port-in-use"].status == "fail"
    assert f"pid {proc.pid}" in found["master-port-in-use"].title
    assert found["master-port-in-use"].fix.startswith(f"kill {proc.pid}   # or pick a free port: export MASTER_PORT=")


def test_port_held_by_the_job_itself_is_not_a_problem(listener) -> None:
    proc, port = listener
    ctx = ProbeContext(pid=proc.pid, env={}, timeout=5.0)
    ctx_env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    facts = netmaster.master_facts(ctx.pid, ctx_env, {"127.0.0.1": "lo"}, None, 2.0)
    assert facts["master_port_held_by_job"] is True
    assert facts["master_port_in_use"] is False


def test_closed_port_is_refused_and_free() -> None:
    port = _closed_port()
    facts = run({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}, root=Path("/"), addrs={})
    assert (facts["master_connect"], facts["master_port_free"]) == ("refused", True)
    assert "master_refused" not in facts  # our own host: rank 0 simply has not started
    assert facts["route_source_ip"] == "127.0.0.1"


def _local_ipv4() -> str | None:
    import psutil

    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return a.address
    return None


def test_refused_on_a_remote_master_warns() -> None:
    ip = _local_ipv4()
    if ip is None:
        pytest.skip("no non-loopback IPv4 address on this host")
    port = _closed_port()
    # This host's own address, judged as if it were rank 0's host elsewhere (it is left out of
    # the local address map): the kernel refuses the connect as a remote host would.
    facts = netmaster.master_facts(None, {"MASTER_ADDR": ip, "MASTER_PORT": str(port)}, {}, None, 2.0)
    assert (facts["master_is_local"], facts["master_connect"]) == (False, "refused")
    assert facts["master_refused"] is True and facts["master_unreachable"] is False
    assert "master_port_in_use" not in facts and facts["master_port_free"] is True


def test_route_interface_excluded_by_ifname_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netmaster, "route_source", lambda ip, port: "10.1.0.2")
    facts = netmaster.master_facts(None, {"MASTER_ADDR": "node0"}, {"10.1.0.2": "eth1"}, ["ib0"],
                                   1.0, resolver=lambda h: ["10.1.0.9"])
    assert (facts["route_interface"], facts["route_interface_not_selected"]) == ("eth1", True)
    assert "master_connect" not in facts  # no MASTER_PORT: nothing to connect to


def test_unresolvable_master_addr_fails() -> None:
    env = {"MASTER_ADDR": "no-such-master.invalid", "MASTER_PORT": str(_closed_port())}
    found = checks(env, root=Path("/"), addrs={})
    assert found["master-addr-unresolvable"].status == "fail"
    assert found["master-addr-unresolvable"].title == "MASTER_ADDR=no-such-master.invalid does not resolve"
    assert found["master-addr-unresolvable"].cause_ids == ("master-addr-port", "network-unreachable")
    assert "master-port-in-use" not in found  # remote-or-unknown master: the local port is not ours


def test_loopback_master_for_a_multinode_job_fails() -> None:
    env = {"MASTER_ADDR": "localhost", "MASTER_PORT": str(_closed_port()), "WORLD_SIZE": "16",
           "LOCAL_WORLD_SIZE": "8"}
    found = checks(env, root=Path("/"), addrs={})
    assert found["loopback-master-multinode"].status == "fail"
