"""The one place that spawns processes: argv only, always a timeout, the whole group killed."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Mapping, Protocol, Sequence


@dataclass(frozen=True)
class CommandResult:
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


class SubprocessRunner:
    """Runs argv in its own session; on timeout kills the whole process group."""

    def __call__(self, argv: Sequence[str], *, timeout: float,
                 env: Mapping[str, str] | None = None) -> CommandResult:
        argv = tuple(argv)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    stdin=subprocess.DEVNULL, env=dict(env) if env is not None else None,
                                    start_new_session=True, text=True, errors="replace")
        except FileNotFoundError:
            return CommandResult(argv, None, "", "", 0.0, f"{argv[0]}: command not found")
        except OSError as exc:
            return CommandResult(argv, None, "", "", 0.0, f"{argv[0]}: {exc.strerror or exc}")
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            out, err = proc.communicate()
            return CommandResult(argv, None, out, err, time.monotonic() - start,
                                 f"{argv[0]}: timed out after {timeout:g}s")
        return CommandResult(argv, proc.returncode, out, err, time.monotonic() - start)


class RecordedRunner:
    """Answers from recordings keyed by argv; anything unrecorded is 'command not found'."""

    def __init__(self, answers: Mapping[tuple[str, ...], CommandResult | str]) -> None:
        self.answers = dict(answers)
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], *, timeout: float,
                 env: Mapping[str, str] | None = None) -> CommandResult:
        argv = tuple(argv)
        self.calls.append(argv)
        answer = self.answers.get(argv)
        if answer is None:
            return CommandResult(argv, None, "", "", 0.0, f"{argv[0]}: command not found")
        if isinstance(answer, str):
            return CommandResult(argv, 0, answer, "", 0.0)
        return answer
