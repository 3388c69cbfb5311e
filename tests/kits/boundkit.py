"""Run the real CLI in a subprocess and judge it the way the bounded tests do: it ends (a generous
timeout fails the test instead of hanging), never prints a traceback, prints no raw control code
on stdout, and stays within a memory bound (the child's own peak RSS, reported at exit)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

# The peak is VmHWM, this process's own high-water mark: ru_maxrss carries the parent's peak
# across fork and exec, so a big test runner would hide a small child (or fake a big one).
WRAPPER = ("import atexit, resource, sys\n"
           "def peak():\n"
           "    try:\n"
           "        for line in open('/proc/self/status'):\n"
           "            if line.startswith('VmHWM:'):\n"
           "                return int(line.split()[1])\n"
           "    except OSError:\n"
           "        pass\n"
           "    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
           "atexit.register(lambda: sys.stderr.write('\\n@@rss %d\\n' % peak()))\n"
           "from distdoctor.tui.cli import main\nsys.exit(main())\n")
TIMEOUT = 120  # generous: the machine is shared; the runs themselves take about a second
MAX_RSS_KB = 300 << 10
# what may never reach a terminal from input: C0 controls but tab and newline, DEL, C1 controls
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


def run(*argv: str, stdin: bytes | None = None, env: dict[str, str] | None = None,
        cwd: str | None = None) -> tuple[int, str, str, int]:
    """(exit code, stdout, stderr without the RSS line, peak RSS in KiB)."""
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *argv], input=stdin, capture_output=True,
                          timeout=TIMEOUT, env={**os.environ, **(env or {})}, cwd=cwd,
                          stdin=None if stdin is not None else subprocess.DEVNULL)
    err = proc.stderr.decode("utf-8", "replace")
    rss = 0
    lines = []
    for line in err.splitlines():
        if line.startswith("@@rss "):
            rss = int(line.split()[1])
        elif line.strip():
            lines.append(line)
    return proc.returncode, proc.stdout.decode("utf-8", "surrogateescape"), "\n".join(lines), rss


def sane(rc: int, out: str, err: str, rss: int, codes: tuple[int, ...] = (0, 1, 2),
         max_rss_kb: int = MAX_RSS_KB) -> None:
    assert rc in codes, (rc, err[-2000:])
    assert "Traceback" not in err and "Traceback" not in out, err[-4000:]
    assert len(err.splitlines()) <= 1, err[-2000:]  # one line, or nothing
    assert not RAW_CONTROL.search(out), repr(RAW_CONTROL.search(out))
    assert not RAW_CONTROL.search(err), repr(err[:400])
    assert 0 < rss < max_rss_kb, f"peak RSS {rss} KiB"
