"""The one place that spawns processes: argv only, always a timeout, the whole group killed."""
from __future__ import annotations

import locale
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import Protocol

from distdoctor.knowledge.frozen import Frozen, frozen
from distdoctor.knowledge.i18n import t


@frozen
class CommandResult(Frozen):
    """What a command did. `error` says why it could not run or finish ("" when it did)."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and self.returncode == 0


class Runner(Protocol):
    def __call__(self, argv: Sequence[str], *, timeout: float,
                 env: Mapping[str, str] | None = None) -> CommandResult: ...


def kill_group(proc: subprocess.Popen) -> None:
    """Kill a process started with start_new_session=True and everything it spawned."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


MiB = 1024 * 1024
KILL_WAIT_S = 5.0  # how long a SIGKILLed child may take to be reaped before we give up on it
_CHUNK = 64 * 1024


def _size_text(n: int) -> str:
    """16777216 -> '16 MiB', for the one-line reason."""
    for unit, size in (("MiB", MiB), ("KiB", 1024)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


def _decode(data: bytes) -> str:
    """What text=True, errors="replace" gave: locale encoding and universal newlines."""
    text = data.decode(locale.getpreferredencoding(False), errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n")


class SubprocessRunner:
    """Runs argv in its own session; on timeout kills the whole process group.

    Output is read as it comes and kept up to a cap per stream: a program that prints without
    end would otherwise fill memory long before its timeout. Past a cap the group is killed."""

    def __init__(self, *, max_stdout: int = 16 * MiB, max_stderr: int = 1 * MiB) -> None:
        self.max_stdout = max_stdout
        self.max_stderr = max_stderr

    def __call__(self, argv: Sequence[str], *, timeout: float,
                 env: Mapping[str, str] | None = None) -> CommandResult:
        argv = tuple(argv)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    stdin=subprocess.DEVNULL, env=dict(env) if env is not None else None,
                                    start_new_session=True)
        except FileNotFoundError:
            return CommandResult(argv, None, "", "", 0.0, t("{command}: command not found", command=argv[0]))
        except OSError as exc:
            return CommandResult(argv, None, "", "", 0.0, f"{argv[0]}: {exc.strerror or exc}")
        out, err = bytearray(), bytearray()
        error = "interrupted"
        try:
            error = self._collect(proc, argv[0], start + timeout, timeout, out, err)
        finally:
            # Not reaped means it timed out, passed a cap or we failed: kill the group, at once.
            # Its pipes are not read to EOF: a process that left the group could hold them open.
            if proc.returncode is None:
                kill_group(proc)
                try:
                    # bounded: a child in uninterruptible sleep (a hung NFS or GPU driver call)
                    # does not die on SIGKILL until the kernel lets it; we must not hang with it
                    proc.wait(timeout=KILL_WAIT_S)
                except subprocess.TimeoutExpired:
                    error = (f"{error}; pid {proc.pid} did not exit {KILL_WAIT_S:g}s after SIGKILL "
                             "(stuck in the kernel?): left behind")
            proc.stdout.close()
            proc.stderr.close()
        return CommandResult(argv, None if error else proc.returncode, _decode(out), _decode(err),
                             time.monotonic() - start, error)

    def _collect(self, proc: subprocess.Popen, name: str, deadline: float, timeout: float,
                 out: bytearray, err: bytearray) -> str:
        """Read both pipes into out/err until EOF, then reap the process, all before `deadline`.
        Returns the error, "" when it finished; on an error the process is left to the caller."""
        streams = {proc.stdout.fileno(): (out, self.max_stdout, "output"),
                   proc.stderr.fileno(): (err, self.max_stderr, "error output")}
        timed_out = f"{name}: timed out after {timeout:g}s"
        with selectors.DefaultSelector() as sel:
            for fd in streams:
                sel.register(fd, selectors.EVENT_READ)
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:  # e.g. it exited, but a grandchild still holds a pipe
                    return timed_out
                for key, _ in sel.select(left):
                    chunk = os.read(key.fd, _CHUNK)
                    if not chunk:
                        sel.unregister(key.fd)
                        continue
                    buf, cap, what = streams[key.fd]
                    buf += chunk
                    if len(buf) > cap:
                        del buf[cap:]
                        return (f"{name}: stopped after {_size_text(cap)} of {what} "
                                "(a program that never stops printing?)")
        try:  # both pipes are closed, yet the process may still run
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return timed_out
        return ""

