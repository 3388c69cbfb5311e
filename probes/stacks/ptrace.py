"""Why this node refuses to let distdoctor attach to a rank (ptrace), in one line, and what to run
instead: kernel.yama.ptrace_scope, a container without SYS_PTRACE, another user's process."""
from __future__ import annotations

import os
import re

from distdoctor.knowledge.i18n import t

from ..base import ProbeContext

CAP_SYS_PTRACE = 19
_DENIED = re.compile(r"permission denied|operation not permitted|os error (1|13)\b|EPERM|EACCES",
                     re.I)


def looks_denied(text: str) -> bool:
    """Whether py-spy's error output is a refused attach, not some other failure."""
    return bool(_DENIED.search(text))


def _status_field(ctx: ProbeContext, path: str, name: str) -> str:
    text = ctx.read_text(path) or ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key == name:
            return value.strip()
    return ""


def has_cap_sys_ptrace(ctx: ProbeContext) -> bool | None:
    """CAP_SYS_PTRACE in this process's effective set (/proc/self/status CapEff); None if unknown."""
    value = _status_field(ctx, "/proc/self/status", "CapEff")
    try:
        return bool(int(value, 16) >> CAP_SYS_PTRACE & 1)
    except ValueError:
        return None


def ptrace_scope(ctx: ProbeContext) -> int | None:
    """kernel.yama.ptrace_scope (0 classic, 1 descendants only, 2 admin only, 3 none); None when
    Yama is absent."""
    text = (ctx.read_text("/proc/sys/kernel/yama/ptrace_scope") or "").strip()
    return int(text) if text.isdigit() else None


def owner_uid(ctx: ProbeContext, pid: int) -> int | None:
    """The real uid a process runs as (/proc/PID/status Uid)."""
    fields = _status_field(ctx, f"/proc/{pid}/status", "Uid").split()
    return int(fields[0]) if fields and fields[0].isdigit() else None


def _user(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (KeyError, ImportError):
        return str(uid)


def explain_refusal(ctx: ProbeContext, pid: int, rerun: str, euid: int | None = None) -> str:
    """One line: why attaching to `pid` is refused here, and what to run instead. `rerun` is the
    distdoctor command line to repeat with more rights (e.g. `distdoctor stacks --pid 42`)."""
    euid = os.geteuid() if euid is None else euid
    cap = has_cap_sys_ptrace(ctx)
    scope = ptrace_scope(ctx)
    owner = owner_uid(ctx, pid)
    if euid == 0 and cap is False:
        return t("ptrace refused: this container lacks the SYS_PTRACE capability (CapEff without "
                 "CAP_SYS_PTRACE); restart it with `docker run --cap-add=SYS_PTRACE` (Kubernetes: "
                 "securityContext.capabilities.add: [\"SYS_PTRACE\"]) or run on the host: `sudo {rerun}`",
                 rerun=rerun)
    if owner is not None and owner != euid and not cap:
        name = _user(owner)
        return t("ptrace refused: process {pid} belongs to user {name} (uid {owner}), not to you; "
                 "run `sudo -u {name} {rerun}` or `sudo {rerun}`", pid=pid, name=name, owner=owner, rerun=rerun)
    if scope == 3:
        return t("ptrace refused: kernel.yama.ptrace_scope=3 forbids every attach until reboot; read "
                 "the logs instead: `distdoctor logs LOGDIR`, and Flight Recorder dumps: "
                 "`distdoctor fr DUMPDIR`")
    if scope == 2 and not cap:
        return t("ptrace refused: kernel.yama.ptrace_scope=2 lets only root attach; run `sudo {rerun}`",
                 rerun=rerun)
    if scope == 1 and not cap:
        return t("ptrace refused: kernel.yama.ptrace_scope=1 lets a process attach only to its own "
                 "children; run `sudo {rerun}` (or `sudo sysctl -w kernel.yama.ptrace_scope=0`)", rerun=rerun)
    return t("ptrace refused although distdoctor may attach (CAP_SYS_PTRACE, ptrace_scope {scope}): a "
             "seccomp or AppArmor/SELinux profile blocks it; run the container with "
             "`--security-opt seccomp=unconfined`, or `sudo {rerun}` on the host",
             scope=scope if scope is not None else t("absent"), rerun=rerun)
