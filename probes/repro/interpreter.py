"""The failing job's Python interpreter, found rather than asked: a running rank's executable, or
the environment its tracebacks name (`.../lib/python3.11/site-packages/torch/...`)."""
from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from distdoctor.knowledge.i18n import t

from ..base import ProbeContext

# a traceback's frame inside an installed torch: the environment's prefix and Python version
_SITE = re.compile(rb"(/[^\s\"':]{1,400}?)/lib/python(\d+\.\d+)/(?:site|dist)-packages/torch/")
READ_BYTES = 4 << 20  # of each log file: tracebacks are near where the job failed or started
MAX_FILES = 64
MAX_DEPTH = 5


@dataclass(frozen=True)
class Found:
    """An interpreter and how it was found, in words for the person."""

    python: str
    how: str


def _usable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def from_prefix(prefix: str, version: str) -> str | None:
    """`prefix/bin/pythonX.Y` (or python3, python) when it exists."""
    for name in (f"python{version}", "python3", "python"):
        candidate = os.path.join(prefix, "bin", name)
        if _usable(candidate):
            return candidate
    return None


def from_log_files(paths: Iterable[str], limit: int = READ_BYTES) -> Found | None:
    """The interpreter whose site-packages the logs' tracebacks name, when it exists here."""
    seen: set[tuple[bytes, bytes]] = set()
    for n, path in enumerate(paths):
        if n >= MAX_FILES:
            break
        try:
            with open(path, "rb") as fh:
                head = fh.read(limit)
        except OSError:
            continue
        for match in _SITE.finditer(head):
            key = (match.group(1), match.group(2))
            if key in seen:
                continue
            seen.add(key)
            prefix = os.fsdecode(match.group(1))
            python = from_prefix(prefix, match.group(2).decode())
            if python:
                return Found(python, t("from the torch paths in the logs ({file})",
                                       file=os.path.basename(path)))
    return None


def from_running_job(ctx: ProbeContext | None = None) -> Found | None:
    """A running rank's executable on this node (a job still hanging), when /proc shows one."""
    from ..stacks.discover import find_jobs

    ctx = ctx or ProbeContext()
    try:
        jobs = find_jobs(ctx)
    except OSError:
        return None
    for job in jobs:
        for rank in job.ranks:
            try:
                exe = os.readlink(ctx.path(f"/proc/{rank.pid}/exe"))
            except OSError:
                continue
            if "python" in os.path.basename(exe) and _usable(exe):
                return Found(exe, t("from the running job's rank {rank} (pid {pid})",
                                    rank=rank.rank, pid=rank.pid))
    return None


def log_files(paths: Iterable[str]) -> list[str]:
    """The files under the given log paths (folders walked at most MAX_DEPTH deep)."""
    out: list[str] = []
    for path in paths:
        if os.path.isfile(path):
            out.append(path)
        elif os.path.isdir(path):
            top = path.rstrip(os.sep).count(os.sep)
            for folder, dirs, files in os.walk(path):
                # torchrun's attempt_N/<rank>/ is three deep: a deeper tree is not a job's logs
                dirs[:] = sorted(dirs) if folder.count(os.sep) - top < MAX_DEPTH else []
                out += [os.path.join(folder, f) for f in sorted(files)]
                if len(out) >= MAX_FILES:
                    return out[:MAX_FILES]
    return out[:MAX_FILES]


def find_job_python(ctx: ProbeContext | None = None, log_paths: Iterable[str] = ()) -> Found | None:
    """The job's interpreter: a running rank's first, else the one the logs' tracebacks name."""
    return from_running_job(ctx) or from_log_files(log_files(log_paths))
