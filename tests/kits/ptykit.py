"""Runs a real terminal program under a pseudo-terminal and waits for text on its screen."""
from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Mapping, Sequence

# CSI (colours, cursor moves), OSC (titles, clipboard) and the two-byte escapes Textual writes
ANSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[=>78]")


class Term:
    """A process on a pty of the given size; `wait_for` blocks on its output, never on a timer."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], size: tuple[int, int] = (80, 24),
                 cwd: str | None = None) -> None:
        master, slave = os.openpty()
        cols, rows = size
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.proc = subprocess.Popen(list(argv), stdin=slave, stdout=slave, stderr=slave,
                                     env=dict(env), cwd=cwd, start_new_session=True,
                                     close_fds=True)
        os.close(slave)
        self.fd = master
        self.raw = b""

    @property
    def text(self) -> str:
        return ANSI.sub(b"", self.raw).decode("utf-8", "replace")

    def wait_for(self, needle: str, timeout: float = 60.0) -> float:
        """Read output until `needle` shows (escape codes removed); the monotonic time it did.
        Raises TimeoutError with the screen's tail when it does not within `timeout`."""
        end = time.monotonic() + timeout
        start = len(self.raw)
        while True:
            if needle in ANSI.sub(b"", self.raw[max(0, start - 4096):]).decode("utf-8", "replace"):
                return time.monotonic()
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{needle!r} did not appear; last output: {self.text[-600:]!r}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: the program exited and the pty closed
                chunk = b""
            if not chunk:
                if needle in self.text:
                    return time.monotonic()
                raise EOFError(f"exited before {needle!r} appeared (code {self.proc.poll()}); "
                               f"last output: {self.text[-600:]!r}")
            self.raw += chunk

    def send(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def kill(self, sig: int = signal.SIGKILL) -> int:
        """Signal the whole process group, reap it, close the pty; the exit status."""
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        code = self.proc.wait(timeout=30)
        os.close(self.fd)
        return code
