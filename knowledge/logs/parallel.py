"""Scanning big plain files in worker processes: each scans a line-aligned byte range."""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from ..i18n import resolve
from .compiled import _compile
from .scan import CHANNEL_BUDGET, candidates, lines_at
from .sources import READ_ERRORS, Source, blocks, split_points

RANGE = 32 << 20  # bytes per task
BATCH_FILES = 64  # files per batch at most: each result holds a file's tail (32 KiB) and its lines
AHEAD = 2  # batches submitted per worker before their results are taken (bounds what waits here)
MIN_TOTAL = 64 << 20  # below this, starting workers costs more than it saves
MAX_WORKERS = 4  # each holds a block buffer and a compiled knowledge base: ~35 MB
WORKERS_ENV = "DISTDOCTOR_LOG_WORKERS"
PR_SET_PDEATHSIG = 1  # linux/prctl.h
# Worker processes of the scans running now: a SIGTERM or SIGHUP handler ends them first.
_LIVE: set = set()


@dataclass
class RangeResult:
    """What a worker found in one range: candidate lines numbered from 1 within the range."""

    lines: list[tuple[int, str, bool]]  # (line, text, read only for its channel transport)
    nlines: int
    tail: bytes
    bytes_read: int
    note: str


def workers_for(sources: list[Source]) -> int:
    """How many worker processes to use (1 = scan in this process)."""
    env = os.environ.get(WORKERS_ENV, "").strip()
    if env.isdigit():
        return max(1, int(env))
    total = sum(s.size for s in sources if s.kind == "plain")
    if total < MIN_TOTAL:
        return 1
    return max(1, min(os.cpu_count() or 1, MAX_WORKERS))


def scan_batch(key: tuple, segments: list[tuple[str, int, int]]) -> list[RangeResult | BaseException]:
    """Worker: scan several ranges (small files travel together: one round trip for many)."""
    out: list[RangeResult | BaseException] = []
    for path, start, stop in segments:
        try:
            out.append(scan_range(key, path, start, stop))
        except READ_ERRORS as exc:
            out.append(exc)
    return out


def scan_range(key: tuple, path: str, start: int, stop: int) -> RangeResult:
    """Worker: scan bytes [start, stop) of a plain file (start is a line start)."""
    comp = _compile(key)
    src = Source(name=path, path=path)
    budget = CHANNEL_BUDGET
    out: list[tuple[int, str, bool]] = []
    for blk in blocks(src, start, stop):
        starts, via, taken = candidates(comp, blk, budget)
        budget -= taken
        for st, line_no, text in lines_at(blk, starts):
            out.append((line_no, text, st in via))
    return RangeResult(out, src.lines, src.tail, src.bytes_read, src.note)


def plain_ranges(sources: list[Source]) -> list[tuple[int, int, int]]:
    """(source index, start, stop) tasks for every plain file, big ones cut at line starts."""
    tasks = []
    for i, src in enumerate(sources):
        if src.kind != "plain" or src.path is None:
            continue
        points = split_points(src.path, src.size, RANGE) if src.size > RANGE else [0, src.size]
        tasks.extend((i, a, b) for a, b in zip(points, points[1:]))
    return tasks


def start_worker(parent: int, lang: str) -> None:
    """Worker initializer: the parent's language (a spawned worker does not inherit --lang), and
    die with the parent."""
    from ..i18n import set_lang

    set_lang(lang)
    die_with_parent(parent)


def die_with_parent(parent: int) -> None:
    """Worker initializer: SIGKILL when the thread that started this worker ends (Linux
    PR_SET_PDEATHSIG), so a killed `distdoctor logs` (SIGKILL included) leaves no worker of
    ~150 MB behind; the resource tracker then sees its pipe close and leaves too. A worker
    whose parent is already gone exits at once."""
    if sys.platform.startswith("linux"):
        import ctypes  # here, in the worker: ~1 ms of every `distdoctor logs` start otherwise

        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass  # no prctl: the handler below still covers SIGTERM and SIGHUP
    if os.getppid() != parent:
        os._exit(1)


def _kill_workers() -> None:
    for proc in list(_LIVE):
        with contextlib.suppress(Exception):
            proc.kill()


def _on_stop(previous: dict[int, object]):
    """A SIGTERM/SIGHUP handler: kill the scan's workers, then do what the signal would have
    done (the previous Python handler, or the default action: die by that signal)."""
    def handler(signum: int, frame: object) -> None:
        _kill_workers()
        before = previous.get(signum)
        if callable(before):
            before(signum, frame)
            return
        signal.signal(signum, before if before is not None else signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    return handler


@contextlib.contextmanager
def _workers_die_with_us() -> Iterator[None]:
    """While a scan runs in the main thread: SIGTERM and SIGHUP kill its workers first (the
    workers themselves block them, and SIGINT: see _quiet_spawn). A signal this process ignores
    (SIGHUP under nohup) stays ignored: nothing is installed for it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, object] = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            before = signal.getsignal(sig)
            if before is not signal.SIG_IGN:
                previous[sig] = before
        handler = _on_stop(previous)
        for sig in previous:
            signal.signal(sig, handler)
    except (ValueError, OSError):
        previous = {}
    try:
        yield
    finally:
        for sig, before in previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, before)


STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


@contextlib.contextmanager
def _quiet_spawn() -> Iterator[None]:
    """While the pool and its workers start: SIGINT, SIGTERM and SIGHUP blocked in this thread,
    a mask the workers inherit through exec (a worker still importing never prints
    KeyboardInterrupt: this process ends them, or PR_SET_PDEATHSIG does; a signal that arrives
    meanwhile is delivered here when the mask is lifted), and file descriptor 2 on /dev/null, which
    the workers and the resource tracker keep (a worker whose parent dies while it starts
    prints no EOFError, the tracker no "leaked semaphore" warning; a worker's own errors come
    back through its future)."""
    old_mask = None
    with contextlib.suppress(AttributeError, OSError, ValueError):
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    saved = -1
    try:
        with contextlib.suppress(OSError):
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                saved = os.dup(2)
                os.dup2(null, 2)
            finally:
                os.close(null)
        yield
    finally:
        if saved >= 0:
            with contextlib.suppress(OSError):
                os.dup2(saved, 2)
            os.close(saved)
        if old_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _start_resource_tracker() -> None:
    """multiprocessing's resource tracker hands `sys.stderr.fileno()` to the process it starts.
    Under the app, Textual's stand-in stderr answers -1 and every pool failed to start ("bad
    value(s) in fds_to_keep"): start the tracker against the real stderr first."""
    from multiprocessing import resource_tracker

    try:
        usable = sys.stderr.fileno() >= 0
    except (AttributeError, OSError, ValueError):
        usable = True  # the tracker skips a stderr without a file descriptor itself
    if usable:
        return
    stand_in, sys.stderr = sys.stderr, sys.__stderr__
    try:
        resource_tracker.ensure_running()
    finally:
        sys.stderr = stand_in


def scan_all(key: tuple, sources: list[Source], tasks: list[tuple[int, int, int]],
             workers: int) -> Iterator[tuple[int, int, RangeResult | BaseException]]:
    """Results in task order (so each file is fed in line order), scanned by `workers` processes.

    spawn, not fork: the app calls this from a worker thread, and forking a threaded process
    can deadlock the child.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    batches: list[list[tuple[int, int, int]]] = [[]]
    size = 0
    for task in tasks:
        if size >= RANGE or len(batches[-1]) >= BATCH_FILES:
            batches.append([])
            size = 0
        batches[-1].append(task)
        size += task[2] - task[1]
    ctx = multiprocessing.get_context("spawn")
    todo = iter(batches)
    with _workers_die_with_us():
        with _quiet_spawn():
            _start_resource_tracker()
            pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=start_worker,
                                       initargs=(os.getpid(), resolve()))
            # the first submits start the workers (spawn starts them on demand)
            pending = deque(_submit(pool, key, sources, batch) for batch in islice(todo, workers * AHEAD))
            _LIVE.update(getattr(pool, "_processes", {}).values())
        yield from _results(pool, key, sources, pending, todo)


def _submit(pool, key: tuple, sources: list[Source], batch: list[tuple[int, int, int]]) -> tuple[list, Any]:
    """(batch, its future), or (batch, None) when the pool can take no more (a worker died)."""
    from concurrent.futures.process import BrokenProcessPool

    try:
        return batch, pool.submit(scan_batch, key, [(sources[i].path, a, b) for i, a, b in batch])
    except (BrokenProcessPool, RuntimeError):
        return batch, None


def _results(pool, key: tuple, sources: list[Source], pending: deque, todo: Iterator[list]
             ) -> Iterator[tuple[int, int, RangeResult | BaseException]]:
    """Each batch's results in order; a batch whose worker died (killed, out of memory: the
    pool is broken) is scanned here instead, so no signal or lost worker ends in a traceback.
    A batch is submitted as one is taken, so only a few batches' results wait here (results
    that pile up while this process feeds the collector were most of the peak memory)."""
    from concurrent.futures.process import BrokenProcessPool

    with pool:
        finished = False
        try:
            while pending:
                batch, fut = pending.popleft()
                try:
                    if fut is None:
                        raise BrokenProcessPool("the pool took no more work")
                    results: list = fut.result()
                except READ_ERRORS as exc:
                    results = [exc] * len(batch)
                except BrokenProcessPool:
                    results = scan_batch(key, [(sources[i].path, a, b) for i, a, b in batch])
                nxt = next(todo, None)
                if nxt is not None:
                    pending.append(_submit(pool, key, sources, nxt))
                for (i, a, _b), res in zip(batch, results):
                    yield i, a, res
            finished = True
        finally:
            procs = list(getattr(pool, "_processes", {}).values())
            if not finished:  # Ctrl-C, an error, or the caller stopped reading: no waiting
                for proc in procs:
                    with contextlib.suppress(Exception):
                        proc.kill()
                pool.shutdown(wait=False, cancel_futures=True)
                _forget_wakeup(pool)
            _LIVE.difference_update(procs)


def _forget_wakeup(pool) -> None:
    """The pool's workers are killed: its manager's wakeup pipe goes with them, and the exit hook
    of concurrent.futures would write to it at interpreter exit and print a traceback."""
    import concurrent.futures.process as futures_process

    wakeups = getattr(futures_process, "_threads_wakeups", None)
    thread = getattr(pool, "_executor_manager_thread", None)
    if isinstance(wakeups, dict) and thread is not None:
        wakeups.pop(thread, None)
