"""crash_guard(): on an exception or a fatal signal, log this rank's context on one line, dump the
Flight Recorder buffer and the Python stacks, destroy the process group and os._exit(1), so the
other ranks fail fast instead of waiting out the collective timeout (GUIDE: rank-crash-deadlock)."""
from __future__ import annotations

import faulthandler
import functools
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
# SIGTERM: torchrun and schedulers stop ranks with it; SIGHUP/SIGUSR2: preemption on some clusters
HANDLED_SIGNALS = ("SIGTERM", "SIGHUP", "SIGUSR2")


def _dist() -> Any:
    """torch.distributed if the script already imported it (the guard never imports torch itself)."""
    dist = sys.modules.get("torch.distributed")
    try:
        return dist if dist is not None and dist.is_available() and dist.is_initialized() else None
    except Exception:  # a half-torn-down torch: behave as if there is no group
        return None


def _rank() -> str:
    dist = _dist()
    if dist is not None:
        try:
            return str(dist.get_rank())
        except Exception as exc:  # the group may be broken by the very failure we report
            return f"{os.environ.get('RANK', '?')} (get_rank failed: {type(exc).__name__})"
    return os.environ.get("RANK", "?")


def one_line_traceback(exc_type: type | None, exc: BaseException | None, tb: TracebackType | None,
                       frame: FrameType | None = None) -> str:
    """`file:line in func > ... > file:line in func: Type: message` on one line."""
    frames = traceback.extract_tb(tb) if tb is not None else traceback.extract_stack(frame)
    where = " > ".join(f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}" for f in frames[-8:])
    what = f"{exc_type.__name__}: {exc}" if exc_type is not None else "no exception"
    return f"{where}: {what}".replace("\n", " | ")


def dump_flight_recorder(rank: str) -> str:
    """Write this rank's Flight Recorder buffer as JSON next to where torch's own dumps go
    ($TORCH_FR_DUMP_TEMP_FILE or the old $TORCH_NCCL_DEBUG_INFO_TEMP_FILE, default
    /tmp/nccl_trace_rank_<rank>.json); returns a line saying where, or why not."""
    c10d = sys.modules.get("torch._C._distributed_c10d")
    dump = getattr(c10d, "_dump_fr_trace_json", None) or getattr(c10d, "_dump_nccl_trace_json", None)
    if dump is None:
        return "flight recorder: unavailable (this torch has no _dump_fr_trace_json)"
    prefix = (os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
              or "/tmp/nccl_trace_rank_")
    path = f"{prefix}{rank.split(' ')[0]}.json"
    try:
        data = dump()
        with open(path, "wb") as fh:
            fh.write(data if isinstance(data, bytes) else str(data).encode())
    except Exception as exc:  # an FR failure must not stop the exit: report it and go on
        return f"flight recorder: not written ({type(exc).__name__}: {exc})"
    return f"flight recorder: {path}"


def _destroy(timeout: float) -> str:
    """destroy_process_group in a thread: with NCCL work in flight it can block, and the exit must not."""
    dist = _dist()
    if dist is None:
        return "process group: none"
    outcome: list[str] = []

    def run() -> None:
        try:
            dist.destroy_process_group()
            outcome.append("destroyed")
        except Exception as exc:
            outcome.append(f"destroy failed ({type(exc).__name__}: {exc})")

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout)
    return f"process group: {outcome[0] if outcome else f'destroy still blocked after {timeout:.0f}s'}"


class CrashGuard:
    """Context manager and decorator; `guard.step = n` in the loop names the step in the crash line."""

    def __init__(self, step: Any = None, *, exit_code: int = 1, destroy_timeout: float = 10.0,
                 stream: Any = None) -> None:
        self.step = step
        self.exit_code = exit_code
        self.destroy_timeout = destroy_timeout
        self.stream = stream
        self._old: dict[int, Any] = {}
        self._fault_was_on = False

    def current_step(self) -> Any:
        step = self.step
        try:
            return step() if callable(step) else step
        except Exception as exc:
            return f"? ({type(exc).__name__})"

    def __enter__(self) -> CrashGuard:
        self._fault_was_on = faulthandler.is_enabled()
        # a segfault or abort cannot run Python: at least the stacks of every thread get printed
        faulthandler.enable(file=self.stream or sys.stderr, all_threads=True)
        if threading.current_thread() is threading.main_thread():
            for name in HANDLED_SIGNALS:
                sig = getattr(signal, name, None)
                if sig is not None:
                    self._old[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        self._restore()
        if exc_type is None or (exc_type is SystemExit and getattr(exc, "code", 1) in (0, None)):
            return False
        self.die(one_line_traceback(exc_type, exc, tb))
        return False  # not reached: die() exits

    def __call__(self, func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)
        return wrapper  # type: ignore[return-value]

    def _restore(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()
        if not self._fault_was_on:
            faulthandler.disable()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        self.die(one_line_traceback(None, None, None, frame).replace("no exception", f"killed by {name}"))

    def die(self, what: str) -> None:
        """Log, dump, destroy, exit. Never returns."""
        out = self.stream or sys.stderr
        rank = _rank()
        started = time.monotonic()
        try:
            print(f"[distdoctor.guard] rank {rank} crashed at step {self.current_step()} (pid {os.getpid()}, "
                  f"host {os.uname().nodename}): {what}", file=out, flush=True)
            print(f"[distdoctor.guard] rank {rank} {dump_flight_recorder(rank)}", file=out, flush=True)
            print(f"[distdoctor.guard] rank {rank} Python stacks follow", file=out, flush=True)
            try:
                faulthandler.dump_traceback(file=out, all_threads=True)
            except (AttributeError, ValueError, OSError):  # a stream without a file descriptor
                traceback.print_stack(file=out)
            print(f"[distdoctor.guard] rank {rank} {_destroy(self.destroy_timeout)}; exiting with "
                  f"{self.exit_code} after {time.monotonic() - started:.1f}s", file=out, flush=True)
        finally:
            # os._exit: no atexit hooks, no joining of non-daemon threads that would keep this rank alive
            os._exit(self.exit_code)


def crash_guard(func: F | None = None, *, step: Any = None, exit_code: int = 1,
                destroy_timeout: float = 10.0, stream: Any = None) -> Any:
    """`with crash_guard() as guard:` (set `guard.step`), `@crash_guard` or `@crash_guard(step=...)`.
    `step` is a value or a callable returning the current step."""
    guard = CrashGuard(step, exit_code=exit_code, destroy_timeout=destroy_timeout, stream=stream)
    return guard(func) if func is not None else guard
