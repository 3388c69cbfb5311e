"""A launched process tree: output streamed to a log and a callback, killed whole, checked gone."""
from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import psutil

POLL_S = 0.1
TRACK_S = 0.5
TERM_GRACE_S = 2.0
KILL_WAIT_S = 5.0
PR_SET_PDEATHSIG = 1  # linux/prctl.h
WATCHDOG_GRACE_S = 2.0

# The watchdog: a tiny process of its own (its own session, so neither a terminal's Ctrl-C nor
# the tree's kill reaches it) that ends the run when distdoctor disappears without cleaning up
# (SIGKILL, a crash). It notices by being reparented; it leaves when the run's session is empty.
# argv: parent pid, the run's session id, grace seconds between SIGTERM and SIGKILL.
WATCHDOG_CODE = r"""
import os, signal, sys, time
parent, sid, grace = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
def members():
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as fh:
                data = fh.read()
            fields = data[data.rfind(b")") + 2:].split()
            if int(fields[3]) == sid and fields[0] != b"Z":
                out.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return out
ticks = 0
while os.getppid() == parent:
    time.sleep(0.2)
    ticks += 1
    if ticks % 10 == 0 and not members():
        sys.exit(0)
try:
    os.killpg(sid, signal.SIGTERM)
except OSError:
    pass  # the session is already gone: nothing to stop
end = time.monotonic() + grace
while time.monotonic() < end and members():
    time.sleep(0.1)
for pid in members():
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass  # it exited between the listing and the kill
"""


def die_with_parent(sig: int = signal.SIGTERM):
    """A preexec_fn: the child gets `sig` when the thread that started it ends (Linux
    PR_SET_PDEATHSIG), so a SIGKILLed distdoctor takes its launcher with it; a child whose
    parent is already gone by then exits at once. None where prctl is unavailable. Everything
    is looked up here, before fork: the child only makes one system call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def start_watchdog(sid: int) -> subprocess.Popen | None:
    """The watchdog process for the run in session `sid` (None where it cannot run)."""
    if not os.path.isdir("/proc/self") or not sys.executable:
        return None
    try:
        return subprocess.Popen([sys.executable, "-I", "-S", "-c", WATCHDOG_CODE, str(os.getpid()),
                                 str(sid), str(WATCHDOG_GRACE_S)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return None  # the deadline and PDEATHSIG still end the run


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the kernel's pick for an ephemeral bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on `port`: a bind succeeds (SO_REUSEADDR, as TCPStore uses, so
    TIME_WAIT leftovers of a closed run do not count) and no socket is in LISTEN on it."""
    try:
        listening = any(c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN
                        for c in psutil.net_connections(kind="tcp"))
    except (psutil.AccessDenied, OSError):
        listening = False  # not allowed to list sockets: the bind below still tells
    if listening:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


class ProcessTree:
    """argv started in a new session; every line of stdout+stderr goes to `log_path` and
    `on_line`. Descendants are tracked while it runs, so none escapes the final kill even if it
    was reparented or left the process group."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, log_path: Path,
                 on_line: Callable[[str], None] | None = None) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self.on_line = on_line
        self.callback_error = ""
        self.lines = 0  # lines written to the log so far
        self._lock = threading.Lock()
        # 0600: what the job prints is its owner's business (paths, hosts, the odd token)
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        self._log = open(fd, "w", encoding="utf-8", errors="replace")
        try:
            # Its own session: the whole run is one killpg away, and a terminal's Ctrl-C goes
            # to distdoctor (which stops the run in order), not straight to the ranks.
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=dict(env), cwd=str(cwd),
                                         start_new_session=True, preexec_fn=die_with_parent())
        except OSError:
            self._log.close()
            raise
        self.sid = self.proc.pid  # start_new_session: the leader's pid is the session id
        self.watchdog = start_watchdog(self.sid)
        self.known: dict[int, psutil.Process] = {}
        self._remember(self.proc.pid)
        self._reader = threading.Thread(target=self._read, daemon=True, name="repro-output")
        self._reader.start()

    def _remember(self, pid: int) -> None:
        try:
            self.known.setdefault(pid, psutil.Process(pid))
        except psutil.NoSuchProcess:
            return

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            with self._lock:
                self._log.write(line + "\n")
                self._log.flush()
                self.lines += 1
            if self.on_line is not None:
                try:
                    self.on_line(line)
                except Exception as exc:  # a display bug must not stall the run's pipe
                    self.callback_error = self.callback_error or f"{type(exc).__name__}: {exc}"

    def note(self, text: str) -> int:
        """Add a distdoctor line to the log; returns the number of lines before it."""
        with self._lock:
            before = self.lines
            self._log.write(f"distdoctor: {text}\n")
            self._log.flush()
            self.lines += 1
            return before

    def track(self) -> None:
        """Remember every current descendant (call it while the tree runs)."""
        try:
            for child in self.known[self.proc.pid].children(recursive=True):
                self.known.setdefault(child.pid, child)
        except (psutil.NoSuchProcess, KeyError):
            return

    def _session_pids(self) -> list[int]:
        pids = []
        for pid in psutil.pids():
            try:
                if os.getsid(pid) == self.sid and pid != os.getpid():
                    pids.append(pid)
            except (ProcessLookupError, PermissionError):
                continue
        return pids

    def wait(self, deadline: float, cancel: threading.Event | None = None) -> str:
        """Block until the launcher exits ("exited"), `deadline` (monotonic) passes ("timeout")
        or `cancel` is set ("cancelled")."""
        next_track = 0.0
        while True:
            now = time.monotonic()
            if now >= next_track:
                self.track()
                next_track = now + TRACK_S
            if cancel is not None and cancel.is_set():
                return "cancelled"
            if now >= deadline:
                return "timeout" if self.proc.poll() is None else "exited"
            try:
                self.proc.wait(min(POLL_S, deadline - now))
                return "exited"
            except subprocess.TimeoutExpired:
                continue

    def kill(self, graceful: bool = True) -> None:
        """SIGTERM the group (the launcher then reports what it saw), then SIGKILL everything
        of the run that is left: the group, the session and every descendant seen."""
        self.track()
        if graceful and self.proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self.proc.wait(TERM_GRACE_S)
            except subprocess.TimeoutExpired:
                pass  # still alive after the grace: SIGKILL below
        self._signal_group(signal.SIGKILL)
        for pid in self._session_pids():
            self._remember(pid)
        for proc in list(self.known.values()):
            if _alive(proc):
                try:
                    proc.kill()
                except psutil.NoSuchProcess:
                    continue
                except psutil.AccessDenied as exc:
                    self.callback_error = self.callback_error or f"cannot kill {proc.pid}: {exc}"
        psutil.wait_procs([p for p in self.known.values() if p.pid != self.proc.pid],
                          timeout=KILL_WAIT_S)
        try:
            self.proc.wait(KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            pass  # reported by survivors()

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.sid, sig)
        except (ProcessLookupError, PermissionError):
            return

    def survivors(self) -> list[int]:
        """Pids of the run still alive (zombies awaiting their reaper do not count)."""
        alive = {pid for pid, proc in self.known.items() if _alive(proc)}
        for pid in self._session_pids():
            try:
                if _alive(psutil.Process(pid)):
                    alive.add(pid)
            except psutil.NoSuchProcess:
                continue
        return sorted(alive)

    def stop_watchdog(self) -> None:
        """The run is over and checked: its watchdog has nothing left to guard."""
        if self.watchdog is not None and self.watchdog.poll() is None:
            self.watchdog.kill()
        if self.watchdog is not None:
            try:
                self.watchdog.wait(KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                pass  # SIGKILLed: the kernel reaps it; the run itself was already checked gone

    def close(self) -> None:
        """Finish reading the output (the pipe closes once every writer is gone)."""
        self.stop_watchdog()
        self._reader.join(KILL_WAIT_S)
        if not self._reader.is_alive():
            with self._lock:
                self._log.close()
            if self.proc.stdout is not None:
                self.proc.stdout.close()

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode
