"""Log inputs: expand paths (dirs, globs, .gz, `-`), vet them, and stream them in line-aligned blocks.

Reading is bounded (see bounds.py): compressed files and stdin stop at a byte budget or when they
expand like a decompression bomb, with a note saying so; a damaged stream keeps what came before
the damage; invalid UTF-8 in a text log is read as U+FFFD (only binary files are skipped).
"""
from __future__ import annotations

import bz2
import io
import lzma
import os
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from ..fswalk import walk
from ..i18n import t as tr
from ..lazyre import lazy
from . import bounds, streams
from .streams import READ_ERRORS

BLOCK = 4 << 20  # bytes read at a time
LINE_CAP = 1 << 20  # longer lines keep only their head and tail
HUGE_SCAN = 64 << 20  # a file with no line break in this much is one huge line, not a log
KEEP = 32 << 10  # how much of an overlong line's head and tail is kept
SNIFF = 64 << 10  # checked for NUL bytes and UTF-8 before a file is read
TAIL = 32 << 10  # the end of each file, kept for tail analysis
STDIN = "-"
_COMPRESSED = {b"\x1f\x8b": "gzip", b"BZh": "bz2", b"\xfd7zXZ\x00": "xz"}
_GLOB_CHARS = lazy(r"[*?\[]")
_NATURAL = lazy(r"(\d+)")


@dataclass
class Skipped:
    """An input that was not read (or not all of it), and why."""

    path: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


@dataclass
class Block:
    """A run of whole lines: data[0:end] ends with a newline (or the file's last line)."""

    data: bytes
    end: int
    first_line: int  # 1-based line number of data[0]
    nlines: int = -1  # newlines in data[:end]; a consumer that counted them sets it (saves a pass)


@dataclass
class Source:
    """One readable input: a file path, a compressed file, or standard input."""

    name: str
    path: str | None  # None for stdin
    kind: str = "plain"  # plain | gzip | bz2 | xz | stdin
    size: int = 0
    raw: BinaryIO | None = field(default=None, repr=False)  # stdin's stream
    bytes_read: int = 0
    lines: int = 0
    tail: bytes = b""
    note: str = ""  # e.g. long lines that were truncated
    rejected: str = ""  # stdin found not to be a text log once read

    def open(self) -> Any:
        if self.kind == "stdin":
            assert self.raw is not None
            return self.raw
        assert self.path is not None
        if self.kind == "gzip":
            import gzip  # on first use: ~0.5 ms of every start otherwise (bz2 and lzma come with argparse)

            return streams.Compressed(self.path, lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"))
        if self.kind == "bz2":
            return streams.Compressed(self.path, lambda raw: bz2.BZ2File(raw, "rb"))
        if self.kind == "xz":
            return streams.Compressed(self.path, lambda raw: lzma.LZMAFile(raw, "rb"))
        return open(self.path, "rb", buffering=0)

    def add_note(self, text: str) -> None:
        self.note = f"{self.note}; {text}" if self.note else text


def _natural_key(path: str) -> list:
    return [int(p) if p.isdigit() else p for p in _NATURAL.split(path)]


def expand(paths: list[str]) -> tuple[list[Source], list[Skipped]]:
    """Sources for files, directories (recursively), globs and `-`; the rest in skipped."""
    sources: list[Source] = []
    skipped: list[Skipped] = []
    seen: set[str] = set()

    def add_file(path: str) -> None:
        real = _real(path)
        if real in seen:
            return
        seen.add(real)
        src, why = vet(path)
        if src is None:
            skipped.append(Skipped(path, why))
        else:
            sources.append(src)

    for arg in paths:
        if arg == STDIN:
            sources.append(Source(name="<stdin>", path=None, kind="stdin", raw=sys.stdin.buffer))
            continue
        if os.path.isdir(arg):
            found = []
            for root, dirs, files in walk(arg, onerror=lambda e, arg=arg: skipped.append(
                    Skipped(getattr(e, "filename", arg) or arg, tr("unreadable directory: {why}", why=e.strerror)))):
                dirs.sort(key=_natural_key)
                found.extend(os.path.join(root, f) for f in files)
            if not found:
                skipped.append(Skipped(arg, tr("empty directory")))
            for path in sorted(found, key=_natural_key):
                add_file(path)
            continue
        if not os.path.lexists(arg) and _GLOB_CHARS.search(arg):
            matches = sorted(bounds.safe_glob(arg), key=_natural_key)
            if not matches:
                skipped.append(Skipped(arg, tr("no file matches this pattern")))
            for path in matches:
                if os.path.isdir(path):
                    sub, sub_skipped = expand([path])
                    for s in sub:
                        if _real(s.path or "") not in seen:
                            seen.add(_real(s.path or ""))
                            sources.append(s)
                    skipped.extend(sub_skipped)
                else:
                    add_file(path)
            continue
        add_file(arg)
    return sources, skipped


def _real(path: str) -> str:
    """The resolved path for de-duplication; a link that cannot be resolved (a /proc link of
    another user's process) stands for itself, and vet() gives the reason it is skipped."""
    try:
        return os.path.realpath(path)
    except OSError:
        return os.path.abspath(path)


def vet(path: str) -> tuple[Source | None, str]:
    """A Source for a readable text log, or None and the reason it is skipped."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return None, tr("unreadable: {why}", why=exc.strerror or exc)
    if not stat.S_ISREG(st.st_mode):
        return None, tr("not a regular file")
    if st.st_size == 0:
        # checked before any read: zero-size files under /proc or /sys (kmsg) can block on read,
        # and an empty compressed file holds nothing either
        return None, tr("empty file")
    try:
        with open(path, "rb") as fh:
            magic = fh.read(6)
    except OSError as exc:
        return None, tr("unreadable: {why}", why=exc.strerror or exc)
    kind = "plain"
    for sig, name in _COMPRESSED.items():
        if magic.startswith(sig):
            kind = name
    src = Source(name=path, path=path, kind=kind, size=st.st_size)
    try:
        with src.open() as fh:
            head = _read_upto(fh, SNIFF)
            why = sniff(head)
            if not why:
                odd = not_utf8(head)
                if odd:
                    src.add_note(odd)
            # a carriage return breaks lines too: progress bars (tqdm) redraw with \r alone
            if not why and not _breaks(head) and len(head) == SNIFF:
                # no line break yet: a long first line is cut by the reader (blocks), and what
                # follows it is read, as far as HUGE_SCAN; with no line break by then it is one
                # huge line, not a log
                got = len(head)
                while got <= HUGE_SCAN:
                    more = fh.read(BLOCK)
                    if not more or _breaks(more[:HUGE_SCAN + 1 - got]):
                        break
                    got += len(more)
                else:
                    why = _huge()
                if got > HUGE_SCAN:
                    why = _huge()
    except READ_ERRORS as exc:
        return None, tr("unreadable {kind} data: {why}", kind=kind, why=exc)
    return (None, why) if why else (src, "")


def _breaks(data: bytes) -> bool:
    return b"\n" in data or b"\r" in data


def _huge() -> str:
    return tr("no line break in the first {mib} MiB: one huge line, not a log", mib=HUGE_SCAN >> 20)


_CONTROL = bytes(b for b in range(32) if chr(b) not in "\t\n\r\f\v\x1b\x08")


def sniff(head: bytes) -> str:
    """Why the start of a stream is not a text log ('' when it is). A few invalid UTF-8 bytes
    (a Latin-1 name, a byte cut by a crash) do not make a log binary: one bad byte near the
    start must not hide the failure line after it. NUL bytes, or more than a tenth of the
    characters undecodable or control characters, do."""
    if not head:
        return tr("empty file")
    window = head[:8192]
    if b"\x00" in window:
        return tr("binary file (NUL bytes)")
    text = window.decode("utf-8", "replace")
    # random bytes hold ~10% control characters; text (UTF-8 or Latin-1) almost none. Each is
    # one byte below 0x20 (a UTF-8 decoder never takes an ASCII byte into another character)
    control = len(window) - len(window.translate(None, _CONTROL))
    bad = text.count("\ufffd")
    if control > max(8, len(text) // 30) or bad > max(8, len(text) // 2):
        return tr("binary file ({n} of the first {total} characters are not text)", n=control + bad, total=len(text))
    return ""


def not_utf8(head: bytes) -> str:
    """A note when the start of a text log holds invalid UTF-8 ('' when it is clean)."""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # a multi-byte character cut by the sniff window is fine
        if not (exc.start >= len(head) - 3 and exc.reason == "unexpected end of data"):
            return tr("not valid UTF-8 (first bad byte at offset {offset}): read with U+FFFD in its place",
                      offset=exc.start)
    return ""


def _read_upto(fh: BinaryIO, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = fh.read(n - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def blocks(src: Source, start: int = 0, stop: int | None = None) -> Iterator[Block]:
    """Line-aligned blocks of a source; overlong lines arrive cut to their head and tail.

    start/stop (plain files only) read a byte range that begins at a line start. Memory stays
    at about BLOCK + 2*KEEP whatever the file size or line length.
    """
    lim = bounds.current()
    if src.kind == "stdin" and src.raw is not None:
        bounds.wait_notice(src.raw, lim)
    fh: Any = src.open()
    if stop is not None:
        fh = streams.Range(fh, start, stop)
    elif src.kind in ("gzip", "bz2", "xz"):
        fh = streams.Salvage(fh)
    line_no = 1
    carry = b""
    long_note = 0
    soft_cut = 0
    first = True
    stopped = ""
    try:
        while True:
            chunk = b"" if stopped else fh.read(BLOCK)
            if first and src.kind == "stdin":
                why = sniff(chunk[:SNIFF]) or (_huge() if len(chunk) > LINE_CAP
                                                and b"\n" not in chunk[:LINE_CAP] else "")
                if why:
                    src.rejected = why
                    return
                odd = not_utf8(chunk[:SNIFF])
                if odd:
                    src.add_note(odd)
            first = False
            if chunk and stop is None:
                left = lim.max_bytes - src.bytes_read
                if src.kind in ("gzip", "bz2", "xz", "stdin") and len(chunk) > left:
                    chunk = chunk[:max(0, left)]
                stopped = bounds.over_budget(src.kind, src.bytes_read + len(chunk), _consumed(fh), lim)
            if not chunk:
                if carry:
                    if len(carry) > bounds.SOFT_CAP:
                        carry, _, n_cut = bounds.cut_long_lines(carry + b"\n", len(carry) + 1)
                        carry = carry[:-1]
                        soft_cut += n_cut
                    src.tail = (src.tail + carry)[-TAIL:]
                    yield Block(carry + b"\n", len(carry) + 1, line_no)
                    line_no += 1
                break
            src.bytes_read += len(chunk)
            data = carry + chunk if carry else chunk
            cut = data.rfind(b"\n") + 1
            if cut and bounds.has_long_line(data, cut):
                data, cut, n_cut = bounds.cut_long_lines(data, cut)
                soft_cut += n_cut
            if cut:
                carry = data[cut:]
                src.tail = (src.tail + data[:cut])[-TAIL:] if cut < TAIL else data[cut - TAIL:cut]
                blk = Block(data, cut, line_no)
                yield blk
                line_no += blk.nlines if blk.nlines >= 0 else data.count(b"\n", 0, cut)
                src.lines = line_no - 1  # so far: a damaged file stops mid-way
            else:
                carry = data
            if len(carry) > LINE_CAP and not stopped:
                # an overlong line: keep its head, stream past the middle, keep its tail
                long_note += 1
                line, carry, ended, stopped = _overlong(fh, carry, src, lim if stop is None else None)
                line, _, n_cut = bounds.cut_long_lines(line, len(line))
                soft_cut += n_cut
                yield Block(line, len(line), line_no)
                line_no += 1
                if not ended:
                    break
    finally:
        if src.kind != "stdin":
            fh.close()
    src.lines = line_no - 1
    if soft_cut > long_note:
        src.add_note(tr("{n} line(s) longer than {most} characters: their middle was left out", n=soft_cut,
                        most=bounds.SOFT_CAP))
    if long_note:
        src.add_note(tr("{n} line(s) longer than {mib} MiB: only their start and end were read", n=long_note,
                        mib=LINE_CAP >> 20))
    if stopped:
        src.add_note(stopped)


def _consumed(fh: Any) -> int:
    return fh.consumed() if hasattr(fh, "consumed") else 0


def _overlong(fh: Any, partial: bytes, src: Source, lim: bounds.Limits | None
              ) -> tuple[bytes, bytes, bool, str]:
    """(the cut line, what follows its newline, whether a newline came, why reading stopped)
    for a line past the cap; a budget (lim) ends it early like the end of the input."""
    head, tail = partial[:KEEP], partial[-KEEP:]
    while True:
        more = fh.read(BLOCK)
        why = bounds.over_budget(src.kind, src.bytes_read + len(more), _consumed(fh), lim) \
            if lim is not None and more else ""
        if why or not more:
            return head + b" [...] " + tail + b"\n", b"", False, why
        src.bytes_read += len(more)
        nl = more.find(b"\n")
        if nl >= 0:
            tail = (tail + more[:nl])[-KEEP:]
            return head + b" [...] " + tail + b"\n", more[nl + 1:], True, ""
        tail = (tail + more)[-KEEP:]


def read_context(path: str, line: int, before: int = 20, after: int = 20) -> list[tuple[int, str]]:
    """Lines [line-before, line+after] of a log as (number, text), streaming: never the whole file.

    Works for plain and compressed files; overlong lines come back cut like the analyser saw them.
    """
    if line < 1:
        line = 1
    lo, hi = max(1, line - before), line + after
    src, why = vet(path)
    if src is None:
        raise ValueError(f"{path}: {why}")
    out: list[tuple[int, str]] = []
    for blk in blocks(src):
        n_lines = blk.data.count(b"\n", 0, blk.end)
        last = blk.first_line + n_lines - 1
        if last < lo:
            continue
        text = blk.data[:blk.end].decode("utf-8", "replace")
        for i, part in enumerate(text.split("\n")[:n_lines]):
            num = blk.first_line + i
            if lo <= num <= hi:
                out.append((num, part.rstrip("\r")))
        if last >= hi:
            break
    return out


def open_text(text: str, name: str) -> Source:
    """A Source over an in-memory string (analyse_text)."""
    return Source(name=name, path=None, kind="stdin", raw=io.BytesIO(text.encode("utf-8", "replace")))


def split_points(path: str, size: int, chunk: int) -> list[int]:
    """Offsets that cut a plain file into ranges of about `chunk` bytes, each at a line start."""
    points = [0]
    with open(path, "rb") as fh:
        pos = chunk
        while pos < size:
            fh.seek(pos)
            buf = fh.read(LINE_CAP + 1)
            nl = buf.find(b"\n")
            if nl < 0:
                break  # an overlong line: leave the rest to one range
            cut = pos + nl + 1
            if cut >= size:
                break
            points.append(cut)
            pos = cut + chunk
    points.append(size)
    return points
