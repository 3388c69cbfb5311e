"""Network probe: interfaces, RDMA devices, NCCL/Gloo interface selection, MASTER_ADDR/PORT."""
from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from . import netmaster, netsel
from .base import OK, ProbeContext, ProbeResult, unavailable
from .netsel import IfAddr
from .procenv import EnvUnreadable, target_env

NAME = "network"
IfAddrs = Callable[[], Mapping[str, list[dict[str, Any]]]]
ARPHRD = {1: "ether", 32: "infiniband", 772: "loopback", 65534: "none"}


def psutil_if_addrs() -> dict[str, list[dict[str, Any]]]:
    """psutil.net_if_addrs() reduced to IPv4/IPv6 {family, address, netmask} records."""
    import psutil

    out: dict[str, list[dict[str, Any]]] = {}
    for name, addrs in psutil.net_if_addrs().items():
        out[name] = [{"family": a.family.name, "address": a.address, "netmask": a.netmask}
                     for a in addrs if a.family in (socket.AF_INET, socket.AF_INET6)]
    return out


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:  # e.g. EINVAL reading `speed` of a virtual or down interface
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def read_interfaces(ctx: ProbeContext,
                    addrs: Mapping[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One record per /sys/class/net entry, in ifindex order (the order getifaddrs() uses)."""
    base = ctx.path("/sys/class/net")
    try:
        names = sorted(os.listdir(base))
    except OSError:
        names = sorted(addrs)
    out = []
    for name in names:
        d = base / name
        speed = _int(_read(d / "speed"))
        kind = _int(_read(d / "type"))
        out.append({
            "name": name,
            "ifindex": _int(_read(d / "ifindex")),
            "state": _read(d / "operstate") or "unknown",
            "mtu": _int(_read(d / "mtu")),
            "speed_mbps": speed if speed and speed > 0 else None,
            "type": ARPHRD.get(kind, str(kind)) if kind is not None else None,
            "addresses": [a["address"] for a in addrs.get(name, [])],
        })
    out.sort(key=lambda i: (i["ifindex"] is None, i["ifindex"] or 0, i["name"]))
    return out


def ifaddr_order(interfaces: list[dict[str, Any]],
                 addrs: Mapping[str, list[dict[str, Any]]]) -> list[IfAddr]:
    """getifaddrs() lists IPv4 addresses first, then IPv6, each in interface order."""
    order = [i["name"] for i in interfaces] + [n for n in addrs if n not in
                                               {i["name"] for i in interfaces}]
    out = []
    for family, label in ((4, "AF_INET"), (6, "AF_INET6")):
        for name in order:
            out += [IfAddr(name, family, a["address"]) for a in addrs.get(name, [])
                    if a["family"] == label]
    return out


def read_rdma(ctx: ProbeContext) -> list[dict[str, Any]]:
    base = ctx.path("/sys/class/infiniband")
    try:
        devices = sorted(os.listdir(base))
    except OSError:
        return []
    out = []
    for dev in devices:
        ports = []
        try:
            port_names = sorted(os.listdir(base / dev / "ports"), key=lambda p: _int(p) or 0)
        except OSError:
            port_names = []
        for port in port_names:
            p = base / dev / "ports" / port
            state = _read(p / "state") or ""
            ports.append({"port": _int(port), "state": state.split(":")[-1].strip() or None,
                          "link_layer": _read(p / "link_layer"), "rate": _read(p / "rate")})
        out.append({"name": dev, "ports": ports})
    return out


def selection_facts(env: Mapping[str, str], interfaces: list[dict[str, Any]],
                    order: list[IfAddr]) -> dict[str, Any]:
    """What NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME pick, and what NCCL's default would."""
    facts: dict[str, Any] = {}
    spec = env.get("NCCL_SOCKET_IFNAME")
    family = netsel.socket_family(env.get("NCCL_SOCKET_FAMILY"))
    selected, rule = netsel.nccl_select(spec, order, family)
    state = {i["name"]: i["state"] for i in interfaces}
    facts.update(nccl_socket_ifname=spec, nccl_rule=rule, nccl_selected=selected,
                 nccl_selected_text=", ".join(selected) or "nothing",
                 nccl_selected_down=[n for n in selected if state.get(n) == "down"])
    if spec is not None and len(spec) > 1:  # NCCL ignores a shorter one: the default search runs
        facts["nccl_ifname_selected"] = selected
    facts["nic_is_docker_or_lo"] = bool(selected) and all(netsel.is_docker_or_lo(n) for n in selected)
    gloo = env.get("GLOO_SOCKET_IFNAME")
    facts["gloo_socket_ifname"] = gloo
    if gloo is not None:
        ok, missing = netsel.gloo_select(gloo, order)
        facts.update(gloo_selected=ok, gloo_missing=missing, gloo_missing_text=", ".join(missing))
    candidates = [i["name"] for i in interfaces if i["state"] != "down"
                  and not netsel.is_docker_or_lo(i["name"])
                  and any(a.name == i["name"] and a.family == 4 for a in order)]
    facts["suggested_ifname"] = candidates[0] if candidates else None
    facts["interfaces_text"] = ", ".join(
        f"{i['name']} ({i['state']}, {', '.join(i['addresses']) or 'no address'})" for i in interfaces)
    return facts


def hostname_facts(env: Mapping[str, str], timeout: float,
                   resolver: netmaster.Resolver) -> dict[str, Any]:
    """Gloo without GLOO_SOCKET_IFNAME binds to what the hostname resolves to: loopback breaks it."""
    host = socket.gethostname()
    ips, why = netmaster.resolve(host, timeout, resolver)
    facts: dict[str, Any] = {"hostname": host, "hostname_addresses": ips}
    if why:
        facts["hostname_error"] = why
    if "GLOO_SOCKET_IFNAME" not in env:
        facts["gloo_default_loopback"] = not ips or all(netmaster.is_loopback(ip) for ip in ips)
    return facts


def probe_network(ctx: ProbeContext, *, if_addrs: IfAddrs | None = None,
                  resolver: netmaster.Resolver = netmaster.getaddrinfo_ips,
                  connections: Callable[[], Iterable[Any]] | None = None) -> ProbeResult:
    """Interfaces under ctx.root, selection rules, and MASTER_ADDR/MASTER_PORT from the target env."""
    try:
        env = target_env(ctx)
    except EnvUnreadable as exc:
        return unavailable(NAME, str(exc))
    if if_addrs is None:
        # psutil answers for the real host, which a recorded root is not
        if_addrs = psutil_if_addrs if ctx.root == Path("/") else dict
    addrs = if_addrs()
    interfaces = read_interfaces(ctx, addrs)
    order = ifaddr_order(interfaces, addrs)
    timeout = min(ctx.timeout, 3.0)
    facts: dict[str, Any] = {"interfaces": interfaces, "rdma": read_rdma(ctx)}
    ports = [p for d in facts["rdma"] for p in d["ports"]]
    if ports:
        facts["rdma_ports_active"] = sum(p["state"] == "ACTIVE" for p in ports)
        facts["rdma_all_down"] = facts["rdma_ports_active"] == 0  # for the readers of the facts
    facts.update(selection_facts(env, interfaces, order))
    facts.update(hostname_facts(env, timeout, resolver))
    local_ips = {a.address.split("%")[0]: a.name for a in order}
    selected = facts.get("nccl_ifname_selected")  # None when NCCL_SOCKET_IFNAME does not apply
    facts.update(netmaster.master_facts(ctx.pid, env, local_ips, selected, timeout, resolver,
                                        connections))
    return ProbeResult(NAME, OK, MappingProxyType(facts))
