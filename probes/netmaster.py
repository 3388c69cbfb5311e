"""MASTER_ADDR and MASTER_PORT: resolution, route, one TCP connect, and who holds the port here."""
from __future__ import annotations

import errno
import ipaddress
import queue
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any

import psutil

Resolver = Callable[[str], list[str]]


def getaddrinfo_ips(host: str) -> list[str]:
    """Every address getaddrinfo gives for host, in its order, each once."""
    seen: list[str] = []
    for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM):
        ip = str(info[4][0])
        if ip not in seen:
            seen.append(ip)
    return seen


def resolve(host: str, timeout: float, resolver: Resolver = getaddrinfo_ips) -> tuple[list[str], str]:
    """(addresses, "") or ([], why). getaddrinfo has no timeout of its own, so it runs in a
    daemon thread and is abandoned at the deadline (a wedged resolver cannot stall the probe)."""
    answer: queue.Queue[tuple[list[str], str]] = queue.Queue(maxsize=1)

    def work() -> None:
        try:
            answer.put((resolver(host), ""))
        except socket.gaierror as exc:
            answer.put(([], exc.strerror or str(exc)))
        except (OSError, UnicodeError) as exc:
            answer.put(([], str(exc)))

    threading.Thread(target=work, daemon=True, name=f"resolve-{host}").start()
    try:
        return answer.get(timeout=timeout)
    except queue.Empty:
        return [], f"resolution timed out after {timeout:g}s"


def route_source(ip: str, port: int) -> str | None:
    """The local address the kernel would use to reach ip: a UDP connect sends nothing."""
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.settimeout(1.0)
            sock.connect((ip, port or 9))
            return str(sock.getsockname()[0])
    except OSError:
        return None


def tcp_connect(ip: str, port: int, timeout: float) -> tuple[str, str]:
    """One connect to ip:port: ("ok"|"refused"|"timed out"|"unreachable"|"error", detail)."""
    try:
        with socket.create_connection((ip, port), timeout=timeout):
            return "ok", "connected"
    except ConnectionRefusedError:
        return "refused", "connection refused"
    except TimeoutError:
        return "timed out", f"no answer within {timeout:g}s"
    except OSError as exc:
        if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
            return "unreachable", exc.strerror or str(exc)
        return "error", exc.strerror or str(exc)


def is_loopback(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip.split("%")[0]).is_loopback
    except ValueError:
        return False


def _psutil_connections() -> Iterable[Any]:
    return psutil.net_connections(kind="inet")


def port_listeners(port: int, connections: Callable[[], Iterable[Any]] | None = None
                   ) -> tuple[list[int | None], str]:
    """Pids listening on port (None for a pid /proc hides from us), or ([], why not known)."""
    try:
        conns = list((connections or _psutil_connections)())
    except (psutil.Error, OSError) as exc:
        return [], f"cannot list sockets: {type(exc).__name__}: {exc}"
    pids: list[int | None] = []
    for conn in conns:
        laddr = getattr(conn, "laddr", None)
        if conn.status == "LISTEN" and laddr and laddr.port == port and conn.pid not in pids:
            pids.append(conn.pid)
    return pids, ""


def bind_free(port: int) -> tuple[bool | None, str]:
    """Whether a server could bind port here (TIME_WAIT ignored, as TCPStore uses SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False, "address already in use"
            return None, exc.strerror or str(exc)
    return True, ""


def process_label(pid: int) -> str:
    """'pid 1234 (python train.py)' when psutil can see it, else 'pid 1234'."""
    try:
        proc = psutil.Process(pid)
        cmd = " ".join(" ".join(proc.cmdline()[:3]).split()) or proc.name()
    except (psutil.Error, OSError):
        return f"pid {pid}"  # gone or another user's: the pid alone still says who to look at
    return f"pid {pid} ({cmd[:60]}{'...' if len(cmd) > 60 else ''})"


def related_pids(pid: int | None) -> set[int]:
    """The job's own processes around --pid (itself, its parents, its children): a port they hold
    is the job's store, not a stale squatter."""
    if pid is None:
        return set()
    out = {pid}
    try:
        proc = psutil.Process(pid)
        out |= {p.pid for p in proc.parents()}
        out |= {p.pid for p in proc.children(recursive=True)}
    except (psutil.Error, OSError):
        pass  # the process went away or is hidden: judge with the pid alone
    return out


def free_port_near(start: int = 29500, tries: int = 64) -> int | None:
    """A port from start upward that nothing here holds (local binds only, never a network scan)."""
    for port in range(start, start + tries):
        free, _ = bind_free(port)
        if free:
            return port
    return None


def _port(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() and 0 < int(text) < 65536 else None


def _multinode(env: Any) -> bool | None:
    try:
        return int(env["WORLD_SIZE"]) > int(env["LOCAL_WORLD_SIZE"])
    except (KeyError, ValueError):
        return None


def master_facts(pid: int | None, env: Any, local_ips: dict[str, str], selected: list[str] | None,
                 timeout: float, resolver: Resolver = getaddrinfo_ips,
                 connections: Callable[[], Iterable[Any]] | None = None) -> dict[str, Any]:
    """Resolve MASTER_ADDR, find the interface that routes to it, connect once to
    MASTER_ADDR:MASTER_PORT, and say whether MASTER_PORT is free here or who holds it.
    `local_ips` maps each local address to its interface; `selected` is what
    NCCL_SOCKET_IFNAME picks (None when it is not set)."""
    addr, port = env.get("MASTER_ADDR"), _port(env.get("MASTER_PORT"))
    facts: dict[str, Any] = {"master_addr": addr, "master_port": port}
    if addr:
        ips, why = resolve(addr, timeout, resolver)
        facts["master_resolved"] = ips
        facts["master_addr_unresolvable"] = not ips
        if why:
            facts["resolve_error"] = why
        if ips:
            ip = ips[0]
            loop = is_loopback(ip)
            facts.update(master_ip=ip, master_is_loopback=loop,
                         master_is_local=loop or ip in local_ips)
            source = route_source(ip, port or 0)
            iface = local_ips.get(source or "")
            facts.update(route_source_ip=source, route_interface=iface)
            if selected is not None and iface and not facts["master_is_local"]:
                facts["route_interface_not_selected"] = iface not in selected
            multinode = _multinode(env)
            if multinode is not None:
                facts["loopback_master_multinode"] = loop and multinode
            if port:
                status, detail = tcp_connect(ip, port, timeout)
                facts.update(master_connect=status, master_connect_detail=detail,
                             master_reachable=status == "ok",
                             master_unreachable=status in ("timed out", "unreachable"))
                if not facts["master_is_local"]:
                    # nothing listening on our own host just means rank 0 has not started here
                    facts["master_refused"] = status == "refused"
    if port:
        facts.update(port_facts(port, pid, addr is None or bool(facts.get("master_is_local")),
                                connections))
    return facts


def port_facts(port: int, pid: int | None, relevant: bool,
               connections: Callable[[], Iterable[Any]] | None) -> dict[str, Any]:
    """Is MASTER_PORT free here; if not, who holds it and whether that matters (`relevant`:
    rank 0 binds it on this host)."""
    listeners, why = port_listeners(port, connections)
    facts: dict[str, Any] = {}
    if why:
        facts["port_listing_error"] = why
    if listeners:
        free: bool | None = False
        label = ", ".join(process_label(p) if p else
                          "a process of another user (pid hidden: run as root to see it)"
                          for p in listeners)
    else:
        free, bind_why = bind_free(port)
        label = "an unknown process (not in the socket list)"
        if bind_why and free is None:
            facts["port_bind_error"] = bind_why
    facts["master_port_free"] = free
    facts["master_port_state"] = "is free here" if free else \
        f"could not be checked here ({facts.get('port_bind_error') or 'unknown'})"
    if free is False:
        known = [p for p in listeners if p]
        job = related_pids(pid)
        by_job = bool(known) and all(p in job for p in known)
        facts.update(master_port_holder=label, master_port_holder_pid=known[0] if known else None,
                     master_port_held_by_job=by_job, master_port_in_use=relevant and not by_job)
        # the one line people read: who holds it and what that means (the ok title uses it)
        if by_job:
            facts["master_port_state"] = (f"is held by the job itself ({label}): expected while it "
                                          "runs, its rank 0 serves the store there")
        elif relevant:
            facts["master_port_state"] = f"is held by another process: {label}" + (
                f", not the job (--pid {pid})" if pid is not None else "")
        else:
            facts["master_port_state"] = (f"is held here by another process ({label}); rank 0 "
                                          "binds it on MASTER_ADDR, not on this host")
        if facts["master_port_in_use"]:
            facts["free_port"] = free_port_near()
    return facts
