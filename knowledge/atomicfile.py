"""The one way distdoctor replaces a file: write beside it, then rename over it."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(path: str | Path, text: str, *, mode: int | None = None, durable: bool = False,
                 errors: str = "strict") -> None:
    """Replace `path` with `text` in one rename: a reader sees the old file or the new, never half.

    The temporary file lies beside `path` as `.NAME.*.tmp` (never matched by a reader's glob on
    NAME's suffix) and is 0600 from the start (mkstemp), so a secret is never readable half-written;
    `mode` sets the final permissions. `durable` fsyncs the data and the folder's rename (sessions,
    the pseudonym map: a power cut must not lose them). The folder must exist. OSError propagates,
    after the temporary file is removed."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors=errors) as fh:
            fh.write(text)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """Make the rename itself durable (a power cut after rename must not lose the new file)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # some filesystems do not allow opening a directory; the rename is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass  # fsync on a directory is unsupported on some filesystems; durability is best effort
    finally:
        os.close(fd)
