"""Limits and system settings probe: the locked-memory limit of the job's processes
(/proc/PID/limits; ibv_reg_mr fails under a small one), logind's RemoveIPC (which deletes a
user's /dev/shm segments when the user's last session ends) and the /dev/shm mount."""
from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any

from ..base import OK, ProbeContext, ProbeResult, unavailable
from .source import glob_files, is_live, is_recorded, read_file

NAME = "limits"
LOGIND = ("etc/systemd/logind.conf",)
LOGIND_DIRS = ("etc/systemd/logind.conf.d/*.conf", "run/systemd/logind.conf.d/*.conf",
               "usr/lib/systemd/logind.conf.d/*.conf")
_MEMLOCK = re.compile(r"^Max locked memory\s+(\S+)\s+(\S+)\s+(\S+)", re.M)
_LIMITS_CONF = re.compile(r"^\s*([^#\s]\S*)\s+(soft|hard|-)\s+memlock\s+(\S+)", re.M)


def _bytes(text: str) -> int | None:
    return None if text == "unlimited" else int(text) if text.isdigit() else None


def memlock(ctx: ProbeContext) -> dict[str, Any]:
    """The soft and hard memlock limits of the job's process (--pid), else of the processes a
    recorded node kept (proc/*/limits), else of this process."""
    if ctx.pid is not None:
        candidates = [f"proc/{ctx.pid}/limits"]
    elif is_live(ctx):
        candidates = ["proc/self/limits"]  # this shell's limit: what a job started here inherits
    else:
        candidates = [p for p in glob_files(ctx, "proc/[0-9]*/limits")] or ["proc/self/limits"]
    for relative in candidates:
        found = read_file(ctx, relative)
        match = _MEMLOCK.search(found.text) if found else None
        if match:
            soft, hard = match[1], match[2]
            return {"memlock_source": relative, "memlock_soft": soft, "memlock_hard": hard,
                    "memlock_soft_bytes": _bytes(soft), "memlock_unlimited": soft == "unlimited"}
    configured = []
    for relative in ["etc/security/limits.conf", *glob_files(ctx, "etc/security/limits.d/*.conf")]:
        found = read_file(ctx, relative)
        for m in _LIMITS_CONF.finditer(found.text if found else ""):
            configured.append(f"{relative}: {m[1]} {m[2]} memlock {m[3]}")
    return {"memlock_source": None, "memlock_configured": configured}


def remove_ipc(ctx: ProbeContext) -> dict[str, Any]:
    """RemoveIPC as logind applies it: the last setting in logind.conf and its drop-ins; else
    the commented default the distribution's logind.conf documents ("#RemoveIPC=yes")."""
    if is_live(ctx) and not ctx.path("/run/systemd/system").is_dir():
        # no systemd as init (a container, another init): no logind to remove anything
        return {"remove_ipc": None, "remove_ipc_source": "systemd is not running here"}
    files = [f for f in LOGIND if read_file(ctx, f)]
    for pattern in LOGIND_DIRS:
        files += glob_files(ctx, pattern)
    if not files:
        return {"remove_ipc": None, "remove_ipc_source": None}
    value, source, default = None, None, None
    for relative in files:
        found = read_file(ctx, relative)
        for line in (found.text if found else "").splitlines():
            m = re.match(r"^\s*(#?)\s*RemoveIPC\s*=\s*(\w+)", line)
            if not m:
                continue
            setting = m[2].lower() in ("yes", "true", "1", "on")
            if m[1]:
                default = (setting, relative) if default is None else default
            else:
                value, source = setting, relative
    if value is None and default is not None:
        value, source = default[0], f"{default[1]} (commented: the compiled-in default)"
    return {"remove_ipc": value, "remove_ipc_source": source}


_SIZE = re.compile(r"(?:^|,)size=(\d+)([kmgKMG%]?)(?:,|$)")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def dev_shm(ctx: ProbeContext) -> dict[str, Any]:
    """The /dev/shm mount line of proc/mounts and its size= option (a tmpfs without one gets
    half the RAM). Sized only for a recorded node: live, the shm probe measures it."""
    found = read_file(ctx, "proc/mounts")
    for line in (found.text if found else "").splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == "/dev/shm":
            match = _SIZE.search(fields[3])
            size = None
            if match and match[2] != "%":
                size = int(match[1]) * _UNITS[match[2].lower()]
            return {"dev_shm_mount": " ".join(fields[2:4]),
                    "recorded_dev_shm_bytes": size if is_recorded(ctx) else None}
    return {"dev_shm_mount": None, "recorded_dev_shm_bytes": None}


def probe_limits(ctx: ProbeContext) -> ProbeResult:
    """memlock of the job's processes and logind's RemoveIPC."""
    facts: dict[str, Any] = {**memlock(ctx), **remove_ipc(ctx), **dev_shm(ctx)}
    rdma = ctx.path("/sys/class/infiniband").is_dir() or \
        read_file(ctx, "sos_commands/infiniband/ibstat") is not None
    facts["rdma_present"] = rdma
    # the limit only matters where RDMA registers memory: judged only there
    facts["rdma_memlock_bytes"] = facts.get("memlock_soft_bytes") if rdma else None
    if facts.get("memlock_source") is None and facts.get("remove_ipc") is None \
            and not facts.get("memlock_configured") and facts.get("dev_shm_mount") is None:
        return unavailable(NAME, "no proc/<pid>/limits, limits.conf or logind.conf to read")
    return ProbeResult(NAME, OK, MappingProxyType(facts))
