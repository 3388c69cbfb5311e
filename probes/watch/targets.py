"""The job being watched: one distdoctor started (`run`: its process tree, ended by distdoctor)
or one already running (`watch`: found as `stacks --job auto` finds it, ended only on request)."""
from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence

import psutil

from ..stacks.discover import Job, RankProc, find_jobs, ranks_for_pids
from .procs import alive, read_stat

TERM_GRACE_S = 5.0


class Target:
    """What the watcher asks of a job."""

    launched = False

    def ranks(self) -> list[RankProc]:
        raise NotImplementedError

    def ended(self) -> bool:
        raise NotImplementedError

    def exit_code(self) -> int | None:
        return None

    def hold(self, pid: int) -> bool:
        """Pause the launcher that would tear the survivors down after `pid` died (so their
        stacks can be taken first); False when there is none this watcher may pause."""
        return False

    def release(self) -> None:
        """Continue whatever hold() paused."""

    def end(self) -> None:
        """End the job: SIGTERM, a grace, then SIGKILL for everything left."""

    def survivors(self) -> list[int]:
        return []

    def expected(self, ranks: Sequence[RankProc]) -> list[str]:
        return Job("", "", list(ranks)).expected()


def _spawned(proc: psutil.Process) -> bool:
    """A multiprocessing child that runs the job's code (not its resource tracker)."""
    try:
        cmd = " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    return "multiprocessing" in cmd and "spawn_main" in cmd or "forkserver" in cmd and "main" in cmd


class Launched(Target):
    """A process tree distdoctor started (probes/repro/proctree.ProcessTree)."""

    launched = True

    def __init__(self, tree) -> None:  # type: ignore[no-untyped-def]
        self.tree = tree
        self._held: list[int] = []
        self._spawn_numbers: dict[int, str] = {}

    def _descendants(self) -> set[int]:
        self.tree.track()
        return {pid for pid, proc in self.tree.known.items()}

    def ranks(self) -> list[RankProc]:
        mine = self._descendants()
        found = [r for job in find_jobs(scope={}) for r in job.ranks if r.pid in mine]
        if found:
            return found
        # mp.spawn: its children carry no RANK; they start in rank order, so number them by pid
        try:
            kids = self.tree.known[self.tree.proc.pid].children(recursive=True)
        except (psutil.NoSuchProcess, KeyError):
            return []
        spawned = sorted((p for p in kids if _spawned(p) and p.pid not in self._spawn_numbers), key=lambda p: p.pid)
        for p in spawned:
            self._spawn_numbers[p.pid] = str(len(self._spawn_numbers))
        return [RankProc(pid, rank) for pid, rank in self._spawn_numbers.items() if alive(pid)]

    def ended(self) -> bool:
        return self.tree.proc.poll() is not None

    def exit_code(self) -> int | None:
        return self.tree.returncode

    def hold(self, pid: int) -> bool:
        st = read_stat(pid)
        parent = st.ppid if st else 0
        if parent <= 1 or parent == os.getpid() or parent not in self._descendants():
            return False
        try:
            os.kill(parent, signal.SIGSTOP)
        except OSError:
            return False
        self._held.append(parent)
        return True

    def release(self) -> None:
        while self._held:
            try:
                os.kill(self._held.pop(), signal.SIGCONT)
            except OSError:
                continue  # gone: nothing to continue

    def end(self) -> None:
        self.release()
        self.tree.kill(graceful=True)

    def survivors(self) -> list[int]:
        return self.tree.survivors()


class Running(Target):
    """A job started without distdoctor: its ranks from `find` (rediscovered as it runs)."""

    def __init__(self, find: Callable[[], list[RankProc]]) -> None:
        self.find = find
        self.seen: dict[int, RankProc] = {}

    def ranks(self) -> list[RankProc]:
        try:
            found = self.find()
        except OSError:
            found = []
        for r in found:
            self.seen.setdefault(r.pid, r)
        return [r for r in found if alive(r.pid)]

    def ended(self) -> bool:
        return bool(self.seen) and not any(alive(pid) for pid in self.seen)

    def _launchers(self) -> set[int]:
        out = set()
        for pid in self.seen:
            st = read_stat(pid)
            if st and st.ppid > 1 and st.ppid != os.getpid():
                out.add(st.ppid)
        return out

    def end(self) -> None:
        """--kill-on-hang: the ranks and the launcher above them, SIGTERM then SIGKILL."""
        procs = []
        for pid in sorted(self._launchers()) + sorted(self.seen):
            try:
                procs.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
        for p in procs:
            try:
                p.terminate()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        _, left = psutil.wait_procs(procs, timeout=TERM_GRACE_S)
        for p in left:
            try:
                p.kill()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        psutil.wait_procs(left, timeout=TERM_GRACE_S)

    def survivors(self) -> list[int]:
        return sorted(pid for pid in self.seen if alive(pid))


def by_pids(pids: Sequence[int]) -> Callable[[], list[RankProc]]:
    return lambda: ranks_for_pids(pids)


def by_job(job_id: str) -> Callable[[], list[RankProc]]:
    def find() -> list[RankProc]:
        for job in find_jobs():
            if job.matches(job_id):
                return job.ranks
        return []
    return find


def wait_gone(pids: Sequence[int], timeout: float) -> list[int]:
    """The pids still alive after up to `timeout` seconds."""
    end = time.monotonic() + timeout
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < end:
        time.sleep(0.1)
        left = [p for p in left if alive(p)]
    return left
