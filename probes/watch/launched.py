"""The job `distdoctor run` starts: a ProcessTree (its own session, every descendant tracked and
killed at the end, a watchdog if distdoctor dies) whose output goes to a file the job owns, not
to a pipe, so a job left running for a human (--keep-running) never writes into a closed pipe.
The file is followed and echoed line by line."""
from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..repro.proctree import ProcessTree, die_with_parent, start_watchdog

FOLLOW_S = 0.1


class JobTree(ProcessTree):
    """ProcessTree with the output in `log_path` (appended by the job itself). With
    `keep=True` the launcher does not die with distdoctor (no PDEATHSIG); leave() stops the
    watchdog so the job outlives the watcher."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, log_path: Path,
                 on_line: Callable[[str], None] | None = None, keep: bool = False) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self.on_line = on_line
        self.callback_error = ""
        self.lines = 0
        self._lock = threading.Lock()
        self._done = threading.Event()
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        os.fchmod(fd, 0o600)
        try:
            self.proc = subprocess.Popen(self.argv, stdout=fd, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=dict(env), cwd=str(cwd),
                                         start_new_session=True,
                                         preexec_fn=None if keep else die_with_parent())
        finally:
            os.close(fd)
        self.sid = self.proc.pid
        self.watchdog = start_watchdog(self.sid)
        self.known = {}
        self._remember(self.proc.pid)
        self._reader = threading.Thread(target=self._follow, daemon=True, name="run-output")
        self._reader.start()

    def _follow(self) -> None:
        """Echo the log's new lines until the job has exited and everything was read."""
        with open(self.log_path, "rb") as fh:
            pending = b""
            while True:
                chunk = fh.read(1 << 16)
                if chunk:
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for raw in lines:
                        self._emit(raw)
                    continue
                if self._done.is_set() or (self.proc.poll() is not None and not self.survivors_quick()):
                    if pending:
                        self._emit(pending)
                    return
                time.sleep(FOLLOW_S)

    def survivors_quick(self) -> bool:
        """Whether a process of the run may still write (its session has members)."""
        return bool(self._session_pids())

    def _emit(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r")
        with self._lock:
            self.lines += 1
        if self.on_line is not None:
            try:
                self.on_line(line)
            except Exception as exc:  # a display bug must not stop the following
                self.callback_error = self.callback_error or f"{type(exc).__name__}: {exc}"

    def note(self, text: str) -> int:
        with self._lock, open(self.log_path, "a", encoding="utf-8") as fh:
            fh.write(f"distdoctor: {text}\n")
            return self.lines

    def close(self) -> None:
        self.stop_watchdog()
        self._done.set()
        self._reader.join(5.0)

    def leave(self) -> None:
        """Leave the job running for a human: no watchdog, no more echo."""
        self.stop_watchdog()
        self._done.set()
