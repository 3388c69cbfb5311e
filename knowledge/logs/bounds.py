"""Bounds on reading logs: a decompressed-bytes budget with a compression-ratio guard, a glob
that never follows a symlinked directory, and a notice when standard input keeps us waiting.

The budget is set per call with `limits(...)` (a context variable, so the analyser's signature
does not change and a thread running another analysis keeps its own bounds).
"""
from __future__ import annotations

import contextlib
import contextvars
import fnmatch
import glob
import os
import re
import select
import stat
from collections.abc import Callable, Iterator
from typing import BinaryIO

from ..frozen import Frozen, frozen
from ..i18n import t as tr
from ..lazyre import lazy

# Per compressed file or standard input: a rank's log rarely passes a few hundred MiB.
DEFAULT_MAX_BYTES = 1 << 30
# Text logs compress 5-30x with gzip (NCCL INFO lines with counters ~20x); repeated identical
# lines reach ~1000x with gzip and far more with bz2. Past RATIO_FLOOR of output, a stream that
# expands more than MAX_RATIO times is stopped: a bomb ends in seconds, a real log is read whole.
MAX_RATIO = 100
RATIO_FLOOR = 8 << 20
WAIT_NOTICE_S = 1.5  # how long a silent pipe on stdin waits before we say we are waiting
GLOB_MAX_ENTRIES = 1_000_000  # directory entries a `**` walk looks at, at most
GLOB_MAX_DEPTH = 200  # folders a `**` walk descends, at most (each is a Python frame)


@frozen
class Limits(Frozen):
    """What one analysis may read. max_ratio None turns the ratio guard off (an explicit
    --max-bytes: the user said how much to read)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_ratio: float | None = MAX_RATIO
    on_wait: Callable[[str], None] | None = None


_LIMITS: contextvars.ContextVar[Limits] = contextvars.ContextVar("distdoctor_log_limits",
                                                                 default=Limits())  # noqa: B039 (frozen)


def current() -> Limits:
    return _LIMITS.get()


@contextlib.contextmanager
def limits(max_bytes: int | None = None, on_wait: Callable[[str], None] | None = None
           ) -> Iterator[Limits]:
    """Bounds for the analyses run inside the block; max_bytes None keeps the default budget
    and the ratio guard."""
    lim = Limits(max_bytes, None, on_wait) if max_bytes is not None else Limits(on_wait=on_wait)
    token = _LIMITS.set(lim)
    try:
        yield lim
    finally:
        _LIMITS.reset(token)


_SIZE = lazy(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.I)


def parse_size(text: str) -> int:
    """'500M', '2G', '1.5GiB', '1000000' -> bytes; ValueError with a one-line reason."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a size (examples: 500M, 2G, 1000000)")
    value = float(m.group(1)) * (1 << (10 * " kmgt".index((m.group(2) or " ").lower())))
    if value < 1 or value > 1 << 50:
        raise ValueError(f"{text!r} is out of range (1 byte to 1 PiB)")
    return int(value)


def size_text(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} bytes"


def over_budget(kind: str, read: int, consumed: int, lim: Limits) -> str:
    """Why reading must stop now ('' to go on): `read` decompressed bytes from `consumed`
    compressed ones. Plain files are not budgeted: their cost is their size, known up front."""
    if kind not in ("gzip", "bz2", "xz", "stdin"):
        return ""
    if read >= lim.max_bytes:
        return tr("stopped after {size} of input (the --max-bytes budget): a partial result; pass a larger "
                  "--max-bytes to read on" if kind == "stdin" else "stopped after {size} decompressed (the "
                  "--max-bytes budget): a partial result; pass a larger --max-bytes to read on", size=size_text(read))
    if lim.max_ratio and kind != "stdin" and read >= RATIO_FLOOR and consumed > 0 \
            and read > lim.max_ratio * consumed:
        return tr("stopped after {size} decompressed: it expands more than {ratio}x (a decompression "
                  "bomb?); a partial result; pass --max-bytes SIZE to read on", size=size_text(read),
                  ratio=f"{lim.max_ratio:g}")
    return ""


def wait_notice(stream: BinaryIO, lim: Limits) -> None:
    """When stdin is a pipe with nothing in it for a while, say we are waiting (once)."""
    if lim.on_wait is None:
        return
    try:
        fd = stream.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
        ready, _, _ = select.select([fd], [], [], WAIT_NOTICE_S)
    except (OSError, ValueError, AttributeError):  # io.BytesIO has no fileno (UnsupportedOperation)
        return
    if not ready:
        lim.on_wait(tr("waiting for input on standard input (a pipe that has sent nothing yet; "
                       "close it or press Ctrl-C to stop)"))


def safe_glob(pattern: str) -> list[str]:
    """glob.glob(pattern, recursive=True), except that `**` never descends into a symlinked
    directory (a link to `..` would loop for ever) and looks at a bounded number of entries."""
    if "**" not in pattern:
        return glob.glob(pattern)
    absolute = pattern.startswith(os.sep)
    parts = [p for p in pattern.split(os.sep) if p]
    found: dict[str, None] = {}
    budget = [GLOB_MAX_ENTRIES]

    def entries(base: str) -> list[os.DirEntry]:
        if budget[0] <= 0:
            return []
        try:
            with os.scandir(base or ".") as it:
                out = list(it)
        except OSError:
            return []
        budget[0] -= len(out)
        return out

    def walk(base: str, i: int, depth: int = 0) -> None:
        if depth > GLOB_MAX_DEPTH:
            return  # a folder nested deeper than any log tree: not followed (no RecursionError)
        if i == len(parts):
            if base:
                found.setdefault(base, None)
            return
        part = parts[i]
        if part == "**":
            walk(base, i + 1, depth + 1)  # zero directories
            for e in entries(base):
                if e.name.startswith("."):
                    continue
                path = os.path.join(base, e.name) if base else e.name
                if e.is_dir(follow_symlinks=False):
                    walk(path, i, depth + 1)
                elif i == len(parts) - 1:
                    # a trailing ** names the files in base too; a link to a directory is named
                    # (expand() reads it, without following links inside) but never descended
                    found.setdefault(path, None)
            return
        if not glob.has_magic(part):
            path = os.path.join(base, part) if base else part
            if os.path.lexists(path):
                walk(path, i + 1, depth + 1)
            return
        for e in entries(base):
            if (e.name.startswith(".") and not part.startswith(".")) or not fnmatch.fnmatchcase(e.name, part):
                continue
            if i < len(parts) - 1 and not e.is_dir():
                continue
            walk(os.path.join(base, e.name) if base else e.name, i + 1, depth + 1)

    walk(os.sep if absolute else "", 0)
    return list(found)


# Lines longer than this keep their head and tail around " [...] ": a crash line with a long
# message is still read as a crash (a longer line is not taken as one), its file is read whole.
SOFT_CAP = 2000
SOFT_HEAD, SOFT_TAIL = 1500, 400
WINDOW = SOFT_CAP // 2  # any line past SOFT_CAP holds one whole window of this size


def has_long_line(data: bytes, end: int) -> bool:
    """Whether data[:end] may hold a line past SOFT_CAP: a window of WINDOW bytes with no line
    break (every such line holds one aligned window). One memchr per window: ~1 ms per 4 MiB."""
    find = data.find
    for start in range(0, end - WINDOW + 1, WINDOW):
        if find(b"\n", start, start + WINDOW) < 0:
            return True
    return False


def cut_long_lines(data: bytes, end: int) -> tuple[bytes, int, int]:
    """(data with each line of data[:end] past SOFT_CAP cut to its head and tail, the new end,
    how many were cut); what follows `end` (a partial line) is kept as it is."""
    lines = data[:end].split(b"\n")
    n = 0
    for i, line in enumerate(lines):
        if len(line) > SOFT_CAP:
            lines[i] = line[:SOFT_HEAD] + b" [...] " + line[-SOFT_TAIL:]
            n += 1
    if not n:
        return data, end, 0
    head = b"\n".join(lines)
    return head + data[end:], len(head), n
