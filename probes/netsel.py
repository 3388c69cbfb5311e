"""Which interfaces NCCL and Gloo would use, under their exact selection rules."""
from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MAX_IFS = 16  # NCCL keeps at most this many socket interfaces


@dataclass(frozen=True)
class IfAddr:
    """One address of one interface, in the order getifaddrs() would list it."""

    name: str
    family: int  # 4 or 6
    address: str


def parse_spec(spec: str) -> tuple[bool, bool, list[str]]:
    """NCCL's prefix list: a leading '^' excludes, then a leading '=' asks for exact names;
    entries are comma-separated and may carry ':port', which socket selection ignores."""
    exclude = spec.startswith("^")
    if exclude:
        spec = spec[1:]
    exact = spec.startswith("=")
    if exact:
        spec = spec[1:]
    items = [item.split(":")[0] for item in spec.split(",") if item.split(":")[0]]
    return exclude, exact, items


def _match_list(name: str, items: Sequence[str], exact: bool) -> bool:
    if not items:  # NCCL: an empty list matches everything
        return True
    return any(name == item if exact else name.startswith(item) for item in items)


def _is_v6_loopback(addr: IfAddr) -> bool:
    try:
        return addr.family == 6 and ipaddress.ip_address(addr.address.split("%")[0]).is_loopback
    except ValueError:
        return False


def find_interfaces(spec: str, addrs: Iterable[IfAddr], family: int | None = None) -> list[str]:
    """NCCL's findInterfaces(): names in getifaddrs order, each once, IPv6 loopback skipped."""
    exclude, exact, items = parse_spec(spec)
    found: list[str] = []
    for addr in addrs:
        if family is not None and addr.family != family:
            continue
        if _is_v6_loopback(addr):
            continue
        if _match_list(addr.name, items, exact) == exclude:  # NCCL: !(match ^ searchNot)
            continue
        if addr.name not in found:
            found.append(addr.name)
        if len(found) >= MAX_IFS:
            break
    return found


def socket_family(value: str | None) -> int | None:
    """NCCL_SOCKET_FAMILY=AF_INET|AF_INET6 forces one family; anything else is ignored."""
    return {"AF_INET": 4, "AF_INET6": 6}.get(value or "")


def nccl_select(spec: str | None, addrs: Sequence[IfAddr],
                family: int | None = None) -> tuple[list[str], str]:
    """(interfaces NCCL would use, the rule that chose them). A spec of one character or less
    is ignored by NCCL (strlen > 1), so the default search runs."""
    if spec is not None and len(spec) > 1:
        return find_interfaces(spec, addrs, family), f"NCCL_SOCKET_IFNAME={spec}"
    for rule in ("ib", "^docker,lo", "docker", "lo"):
        found = find_interfaces(rule, addrs, family)
        if found:
            return found, f"default ({rule!r})"
    return [], "default (nothing found)"


def is_docker_or_lo(name: str) -> bool:
    return name.startswith("docker") or name.startswith("lo")


def gloo_select(spec: str, addrs: Sequence[IfAddr]) -> tuple[list[str], list[str]]:
    """GLOO_SOCKET_IFNAME is a comma list of exact names, each needing an address:
    (names that work, names that do not exist or have no address)."""
    have = {a.name for a in addrs}
    names = [n.strip() for n in spec.split(",") if n.strip()]
    return [n for n in names if n in have], [n for n in names if n not in have]
