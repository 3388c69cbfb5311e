"""What the watcher reads about a process from /proc (CPU seconds, state, session, the exit
status a zombie still holds) and a thread that wakes the moment a rank exits (pidfd), whether or
not distdoctor is its parent."""
from __future__ import annotations

import os
import re
import select
import threading
from collections.abc import Callable
from dataclasses import dataclass

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class ProcStat:
    """One read of /proc/PID/stat."""

    pid: int
    state: str  # R S D T t Z X
    ppid: int
    sid: int
    cpu_s: float  # user + system, every thread
    exit_status: int | None  # waitpid's status, meaningful for a zombie only (Linux 3.5+)


def read_stat(pid: int, proc: str = "/proc") -> ProcStat | None:
    """The process's stat line, parsed; None when it is gone (or was never there)."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()
    if len(fields) < 13:
        return None
    status = int(fields[49]) if len(fields) > 49 and fields[49].isdigit() else None
    return ProcStat(pid, fields[0].decode(), int(fields[1]), int(fields[3]),
                    (int(fields[11]) + int(fields[12])) / CLK_TCK, status)


# The threads that move a collective's bytes: Gloo's work loops and its TCP event loop, NCCL's
# proxy/service threads (socket transport). Their reads and writes growing are collectives
# completing; a hung job's are flat (its other threads, a metrics pusher's, do not count).
COLLECTIVE_THREADS = re.compile(r"^(pt_gloo_runloop|gloo_tcp_loop|NCCL)", re.I)


def collective_threads(pid: int, proc: str = "/proc") -> list[int]:
    """The thread ids of `pid` named as a collective library's I/O threads."""
    try:
        tids = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return []
    out = []
    for tid in tids:
        try:
            with open(f"{proc}/{pid}/task/{tid}/comm", encoding="utf-8", errors="replace") as fh:
                if COLLECTIVE_THREADS.match(fh.read().strip()):
                    out.append(int(tid))
        except OSError:
            continue  # the thread ended between the listing and the read
    return out


def threads_io(pid: int, tids: list[int], proc: str = "/proc") -> int | None:
    """Bytes read and written so far by these threads (rchar + wchar: sockets included); None
    when none could be read."""
    total, seen = 0, False
    for tid in tids:
        try:
            with open(f"{proc}/{pid}/task/{tid}/io", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        for line in data.splitlines():
            if line.startswith((b"rchar:", b"wchar:")):
                total += int(line.split()[1])
                seen = True
    return total if seen else None


def process_io(pid: int, proc: str = "/proc") -> int | None:
    """Bytes the whole process read and wrote so far (rchar + wchar); None when unreadable."""
    try:
        with open(f"{proc}/{pid}/io", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    return sum(int(line.split()[1]) for line in data.splitlines() if line.startswith((b"rchar:", b"wchar:")))


def returncode(status: int | None) -> int | None:
    """waitpid's status as subprocess writes it: the exit code, or -signal."""
    if status is None:
        return None
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return None


def alive(pid: int) -> bool:
    """Running (a zombie has finished: it only waits for its parent to read its status)."""
    st = read_stat(pid)
    return st is not None and st.state not in ("Z", "X")


class DeathWatch:
    """Every watched pid's pidfd in one poll(): `on_exit(pid, returncode or None)` is called
    from this thread as soon as a process ends, before its parent (a launcher that tears the
    job down on the first death) has reaped it, while its exit status is still readable.
    Where pidfds are missing (Linux < 5.3), `supported` is False and the caller polls."""

    def __init__(self, on_exit: Callable[[int, int | None], None]) -> None:
        self.on_exit = on_exit
        self.supported = hasattr(os, "pidfd_open")
        self._fds: dict[int, int] = {}  # fd -> pid
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="watch-deaths", daemon=True)
        self._thread.start()

    def add(self, pid: int) -> bool:
        """Watch `pid`; False when it cannot be (gone already, or no pidfds here)."""
        if not self.supported:
            return False
        try:
            fd = os.pidfd_open(pid)  # type: ignore[attr-defined]
        except OSError:
            return False
        with self._lock:
            self._fds[fd] = pid
        os.write(self._wake_w, b"x")
        return True

    def _run(self) -> None:
        while not self._closed:
            poller = select.poll()
            poller.register(self._wake_r, select.POLLIN)
            with self._lock:
                for fd in self._fds:
                    poller.register(fd, select.POLLIN)
            try:
                events = poller.poll(1000)
            except OSError:
                continue  # EINTR: poll again
            for fd, _ in events:
                if fd == self._wake_r:
                    try:
                        os.read(self._wake_r, 512)
                    except OSError:
                        pass  # the pipe is being closed: the loop's test ends the thread
                    continue
                with self._lock:
                    pid = self._fds.pop(fd, None)
                if pid is None:
                    continue
                st = read_stat(pid)
                os.close(fd)
                try:
                    self.on_exit(pid, returncode(st.exit_status) if st and st.state == "Z" else None)
                except Exception as exc:  # a bug in the callback must not blind the watch
                    import sys
                    print(f"distdoctor: watch: {type(exc).__name__}: {exc}", file=sys.stderr)

    def close(self) -> None:
        self._closed = True
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass  # already closed
        self._thread.join(2.0)
        with self._lock:
            for fd in self._fds:
                os.close(fd)
            self._fds.clear()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass  # closed twice: nothing to do
