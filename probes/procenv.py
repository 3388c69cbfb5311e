"""The environment a probe judges: the current one, or a running rank's from /proc/PID/environ."""
from __future__ import annotations

from collections.abc import Mapping

from .base import ProbeContext


class EnvUnreadable(Exception):
    """/proc/PID/environ could not be read; the message says why."""


def parse_environ(data: bytes) -> dict[str, str]:
    """Parse the NUL-separated NAME=value records of /proc/PID/environ."""
    env: dict[str, str] = {}
    for record in data.split(b"\0"):
        name, sep, value = record.partition(b"=")
        if sep and name:
            env[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def read_environ(ctx: ProbeContext, pid: int) -> dict[str, str]:
    """The environment process `pid` was started with; EnvUnreadable when /proc refuses."""
    path = ctx.path(f"/proc/{pid}/environ")
    try:
        with open(path, "rb") as fh:
            return parse_environ(fh.read(1 << 22))
    except FileNotFoundError:
        raise EnvUnreadable(f"no process {pid} (no {path})") from None
    except PermissionError:
        raise EnvUnreadable(f"cannot read /proc/{pid}/environ: permission denied "
                            "(run as the job's user or root)") from None
    except OSError as exc:
        raise EnvUnreadable(f"cannot read /proc/{pid}/environ: {exc.strerror or exc}") from None


def target_env(ctx: ProbeContext) -> Mapping[str, str]:
    """ctx.env, or the environment of ctx.pid when one is set (EnvUnreadable if it cannot be read)."""
    if ctx.pid is None:
        return ctx.env
    return read_environ(ctx, ctx.pid)


def env_source(ctx: ProbeContext) -> str:
    """Where the judged environment came from, for the facts."""
    return "environment" if ctx.pid is None else f"/proc/{ctx.pid}/environ"
