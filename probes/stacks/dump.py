"""Dump every rank with py-spy: in parallel (a bounded pool), each under a timeout, and no rank
left stopped afterwards."""
from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from distdoctor.knowledge.i18n import t

from ..base import ProbeContext
from ..runner import CommandResult, Runner, SubprocessRunner
from .discover import RankProc
from .frames import DumpUnreadable, main_thread, parse_json_dump, parse_text_dump
from .ptrace import explain_refusal, looks_denied

DUMP_TIMEOUT_S = 20.0  # py-spy pauses a rank for milliseconds; a slow attach on a loaded node is seconds
MAX_WORKERS = 16


class NoPySpy(Exception):
    """py-spy is not installed where distdoctor can find it."""


def find_pyspy() -> str:
    """py-spy next to this interpreter (its wheel installs it in the same bin/), else on PATH."""
    here = Path(sys.executable).parent / "py-spy"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        found = os.path.join(folder or ".", "py-spy")
        if os.path.isfile(found) and os.access(found, os.X_OK):
            return found
    raise NoPySpy(t("py-spy not found (next to this python or on PATH): "
                  "`pip install py-spy` in distdoctor's environment"))


def proc_state(ctx: ProbeContext, pid: int) -> str:
    """The state letter of /proc/PID/stat (R, S, D, T stopped, t traced, Z); "" when gone."""
    text = ctx.read_text(f"/proc/{pid}/stat") or ""
    _, _, rest = text.rpartition(")")
    return rest.split()[0] if rest.split() else ""


def ensure_running(ctx: ProbeContext, pid: int, before: str) -> str:
    """If the dump left `pid` stopped (py-spy killed at its timeout while attached), continue it.
    A rank that was already stopped before (someone's Ctrl-Z, a debugger) is left as it was.
    Returns a note when something was done or seen, "" otherwise."""
    after = proc_state(ctx, pid)
    if after not in ("T", "t") or before in ("T", "t"):
        return ""
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        return ""
    except PermissionError as exc:
        return t("left stopped and cannot be continued ({why}): run `kill -CONT {pid}`", why=exc.strerror, pid=pid)
    return t("was left stopped by the dump and has been continued (SIGCONT)")


def _error_line(res: CommandResult) -> str:
    if res.error:  # "/venv/bin/py-spy: timed out after 20s" -> "py-spy: timed out after 20s"
        return res.error.replace(res.argv[0], "py-spy", 1) if res.argv else res.error
    lines = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()]
    pick = next((ln for ln in lines if ln.startswith("Error:")), lines[0] if lines else "")
    return t("py-spy exit code {code}", code=res.returncode) + (f": {pick[:200]}" if pick else "")


def dump_one(pid: int, pyspy: str, *, native: bool = False, timeout: float = DUMP_TIMEOUT_S,
             runner: Runner | None = None, ctx: ProbeContext | None = None,
             rerun: str = "distdoctor stacks") -> tuple[list[dict[str, Any]], str]:
    """The main thread's frames of `pid` (innermost first), or [] and why not."""
    runner = runner or SubprocessRunner()
    ctx = ctx or ProbeContext()
    before = proc_state(ctx, pid)
    if not before:
        return [], t("process gone before it could be dumped")
    argv = [pyspy, "dump", "--pid", str(pid)] + (["--native"] if native else [])
    res = runner(argv + ["--json"], timeout=timeout)
    as_json = True
    if res.returncode not in (0, None) and "--json" in res.stderr:  # an old py-spy without --json
        res, as_json = runner(argv, timeout=timeout), False
    note = ensure_running(ctx, pid, before)
    if not res.ok:
        said = res.stderr + res.stdout
        if not res.error and looks_denied(said):
            return [], explain_refusal(ctx, pid, f"{rerun} --pid {pid}")
        if not proc_state(ctx, pid):
            return [], t("process exited while it was being dumped")
        return [], _error_line(res) + (f"; {note}" if note else "")
    try:
        threads = parse_json_dump(res.stdout) if as_json else parse_text_dump(res.stdout)
    except DumpUnreadable as exc:
        return [], str(exc)
    thread = main_thread(threads, pid)
    if thread is None:
        return [], "py-spy found no Python thread"
    return thread.frames, ""


def dump_all(ranks: Sequence[RankProc], host: str, *, native: bool = False,
             timeout: float = DUMP_TIMEOUT_S, workers: int = MAX_WORKERS,
             runner: Runner | None = None, ctx: ProbeContext | None = None,
             rerun: str = "distdoctor stacks",
             on_rank: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """One {"rank", "pid", "host", "frames"} (plus "error") per rank, in the order given."""
    pyspy = find_pyspy()
    ctx = ctx or ProbeContext()

    def one(rank: RankProc) -> dict[str, Any]:
        frames, error = dump_one(rank.pid, pyspy, native=native, timeout=timeout, runner=runner,
                                 ctx=ctx, rerun=rerun)
        entry: dict[str, Any] = {"rank": rank.rank, "pid": rank.pid, "host": host, "frames": frames}
        if error:
            entry["error"] = error
        if on_rank:
            on_rank(entry)
        return entry

    if not ranks:
        return []
    # plain threads over a shared index, not concurrent.futures: its import (logging and all)
    # costs more than the dump of a rank, and this runs while a job hangs
    results: list[dict[str, Any] | None] = [None] * len(ranks)
    lock = threading.Lock()
    todo = iter(range(len(ranks)))

    def worker() -> None:
        while True:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            try:
                results[i] = one(ranks[i])
            except Exception as exc:  # a bug for one rank is that rank's error, not everyone's
                results[i] = {"rank": ranks[i].rank, "pid": ranks[i].pid, "host": host,
                              "frames": [], "error": f"{type(exc).__name__}: {exc}"}

    threads = [threading.Thread(target=worker, name=f"stacks-dump-{n}", daemon=True)
               for n in range(max(1, min(workers, len(ranks))))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [r for r in results if r is not None]
