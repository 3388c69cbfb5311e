"""Byte streams under the log reader: a byte range of a plain file, a decompressor whose
compressed position is known (for the ratio guard), and a salvaging reader that keeps what came
before a damaged spot of a compressed file."""
from __future__ import annotations

import lzma
import zlib
from collections.abc import Callable
from typing import Any, BinaryIO

# what reading a damaged file can raise: OSError (incl. BadGzipFile), EOFError (truncated),
# zlib.error / LZMAError (corrupt data), ValueError (bad bz2 stream)
READ_ERRORS = (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError)


class Compressed:
    """A decompressing reader over a file we opened, so that the compressed bytes consumed so far
    are known (raw.tell()) for the ratio guard; closing it closes both."""

    def __init__(self, path: str, opener: Callable[[Any], Any]) -> None:
        self.raw = open(path, "rb")
        try:
            self.fh = opener(self.raw)
        except BaseException:
            self.raw.close()
            raise

    def read(self, n: int = -1) -> bytes:
        return self.fh.read(n)

    def read1(self, n: int = -1) -> bytes:
        return self.fh.read1(n)

    def consumed(self) -> int:
        try:
            return self.raw.tell()
        except (OSError, ValueError):
            return 0

    def close(self) -> None:
        try:
            self.fh.close()
        finally:
            self.raw.close()

    def __enter__(self) -> Compressed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Range:
    """Reads bytes [start, stop) of a file (a worker's share of a big plain file)."""

    def __init__(self, fh: BinaryIO, start: int, stop: int) -> None:
        fh.seek(start)
        self.fh, self.left = fh, stop - start

    def read(self, n: int) -> bytes:
        if self.left <= 0:
            return b""
        data = self.fh.read(min(n, self.left))
        self.left -= len(data)
        return data

    def close(self) -> None:
        self.fh.close()


class Salvage:
    """Reads a compressed stream in small steps so that data before a damaged spot is kept;
    the error is raised on the read after it."""

    STEP = 64 << 10

    def __init__(self, fh: Any) -> None:
        self.fh, self.error = fh, None

    def consumed(self) -> int:
        return self.fh.consumed() if hasattr(self.fh, "consumed") else 0

    def read(self, n: int) -> bytes:
        if self.error is not None:
            raise self.error
        parts, got = [], 0
        try:
            while got < n:
                piece = self.fh.read1(min(self.STEP, n - got)) if hasattr(self.fh, "read1") \
                    else self.fh.read(min(self.STEP, n - got))
                if not piece:
                    break
                parts.append(piece)
                got += len(piece)
        except READ_ERRORS as exc:
            if not parts:
                raise
            self.error = exc
        return b"".join(parts)

    def close(self) -> None:
        self.fh.close()
