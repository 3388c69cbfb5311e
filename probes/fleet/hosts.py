"""Host lists: `node[01-04],gpu7` ranges, host files, and names safe to use as file names."""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from distdoctor.knowledge.errors import InputError
from distdoctor.knowledge.i18n import t

MAX_HOSTS = 100_000  # more than any cluster; a typo like node[1-99999999] must not eat memory
MAX_HOSTFILE_BYTES = 16 << 20
_RANGE = re.compile(r"^([^\[\]]*)\[([^\[\]]+)\]([^\[\]]*)$")
_SAFE = re.compile(r"[^A-Za-z0-9_.@-]")


# What a host given to `fleet collect` (and named in a snapshot) may look like: an optional
# user@, then a name or address; never an option ("-oProxyCommand=..."), never a shell word.
_HOST_OK = re.compile(r"^(?:[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}@)?"
                      r"(?:(?:[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}|\[[0-9A-Fa-f:.]{2,45}\])(?::\d{1,5})?"
                      r"|[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7})$")


def host_problem(host: str) -> str:
    """"" for a host name safe to put in a command (ssh, srun, pdsh), else why not: a name that
    starts with "-" is an option to ssh (-oProxyCommand=... runs a command), and spaces, quotes,
    `;`, `$` or control characters have no place in a host name."""
    if not isinstance(host, str) or not host:
        return "empty"
    if host.startswith("-"):
        return t("starts with '-' (it would be read as an option)")
    if len(host) > 320:
        return t("longer than any host name")
    if not _HOST_OK.match(host):
        return t("holds characters no host name has")
    return ""


_WITH_PORT = re.compile(r"^(?P<name>(?:[^@\s]+@)?(?:\[[0-9A-Fa-f:.]+\]|[^:\[\]\s]+)):(?P<port>\d{1,5})$")


def ssh_destination(host: str) -> list[str]:
    """ssh's arguments for a host as written in a host list or a snapshot: `node9:22` and
    `[fe80::1]:2222` as `-p PORT NAME` (ssh takes no port in its destination), an IPv6 address
    in brackets without them, anything else as it is."""
    m = _WITH_PORT.match(host)
    if m:
        name = m.group("name")
        user, at, addr = name.rpartition("@")
        if addr.startswith("[") and addr.endswith("]"):
            name = user + at + addr[1:-1]
        return ["-p", m.group("port"), name]
    return [host]


class HostListError(InputError, ValueError):
    """A host list that cannot be read; the message is one line."""


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets: "n[1-2,5],m" -> ["n[1-2,5]", "m"]."""
    parts, depth, cur = [], 0, []
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def expand_hosts(text: str) -> list[str]:
    """Expand a Slurm/pdsh style list: "node[01-03,7],login" -> node01 node02 node03 node7 login."""
    hosts: list[str] = []
    for item in _split_top(text):
        match = _RANGE.match(item)
        if not match:
            if "[" in item or "]" in item:
                raise HostListError(t("bad host range {item}: use one bracket, e.g. node[01-04]", item=repr(item)))
            hosts.append(item)
            continue
        prefix, body, suffix = match.groups()
        for part in body.split(","):
            lo, sep, hi = part.strip().partition("-")
            if not lo.isdigit() or (sep and not hi.isdigit()):
                raise HostListError(t("bad host range {item}: {part} is not N or N-M", item=repr(item), part=repr(part)))
            if not sep:
                hosts.append(f"{prefix}{lo}{suffix}")
                continue
            if int(hi) < int(lo):
                raise HostListError(t("bad host range {item}: {part} counts down", item=repr(item), part=repr(part)))
            if len(hosts) + int(hi) - int(lo) + 1 > MAX_HOSTS:
                raise HostListError(t("bad host range {item}: more than {most} hosts", item=repr(item), most=MAX_HOSTS))
            width = len(lo) if lo.startswith("0") else 0
            hosts.extend(f"{prefix}{i:0{width}d}{suffix}" for i in range(int(lo), int(hi) + 1))
    for host in hosts:
        why = host_problem(host)
        if why:
            raise HostListError(t("bad host name {host}: {why}", host=repr(host), why=why))
    return list(dict.fromkeys(hosts))  # keep order, drop repeats


def read_hostfile(path: str | Path) -> list[str]:
    """One host (or range) per line; '#' comments, blank lines and MPI `slots=` fields ignored."""
    try:
        st = os.stat(path)
        # a FIFO would block the read and /dev/zero never ends
        if not stat.S_ISREG(st.st_mode):
            raise HostListError(t("host file {path}: not a regular file", path=path))
        if st.st_size > MAX_HOSTFILE_BYTES:
            raise HostListError(t("host file {path}: {size} MiB, too big for a host list", path=path, size=st.st_size >> 20))
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HostListError(t("host file {path}: no such file", path=path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HostListError(t("host file {path}: unreadable ({why})", path=path, why=exc)) from None
    hosts: list[str] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            hosts.extend(expand_hosts(line.split()[0]))
    return list(dict.fromkeys(hosts))


def safe_name(host: str) -> str:
    """A file name for a host: `user@node:22` -> `user@node_22`."""
    name = _SAFE.sub("_", host).lstrip(".") or "host"
    return name[:200]
