"""A small JSON cache in the state folder: what is slow to rebuild from the knowledge files (the
validated knowledge base, the log scan's prefilter plan), keyed on a hash of everything it is
made from. A missing, unreadable, corrupt, partial or foreign file is a miss, and the caller
rebuilds; a write goes to a temporary file renamed over the old one (concurrent writers each
leave a whole file); a read-only or full state folder only costs the time saved. JSON, never
pickle: a cache file is read, never run."""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .statedir import state_dir

try:  # hashlib would load OpenSSL first (~10 ms of every start); the same BLAKE2 without it
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without the built-in module
    from hashlib import blake2b

FORMAT = 1  # bumped when the layout of a cache file changes
OFF_ENV = "DISTDOCTOR_NO_CACHE"  # set (to anything) to read and write no cache
MAX_BYTES = 8 << 20  # a knowledge base is ~0.5 MB as JSON: a bigger file is not ours


def digest(parts: Iterable[bytes | str]) -> str:
    """A hex BLAKE2b over `parts`, each length-prefixed (so ("ab", "c") and ("a", "bc") differ),
    with this cache format and Python's version mixed in."""
    h = blake2b(f"distdoctor-cache {FORMAT} {sys.version_info[:2]}".encode(), digest_size=32)
    for part in parts:
        data = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def source_parts(*files: str | os.PathLike[str]) -> list[bytes]:
    """The path and bytes of each file (the code a cached value was made by, or the data it was
    made from); an unreadable file counts as its name and the error."""
    out: list[bytes] = []
    for f in files:
        out.append(os.fsencode(f))
        try:
            out.append(Path(f).read_bytes())
        except OSError as exc:
            out.append(f"unreadable: {exc.errno}".encode())
    return out


def path_for(name: str) -> Path:
    return state_dir("cache", f"{name}.json")


def load(name: str, key: str, object_hook: Callable[[dict[str, Any]], Any] | None = None) -> Any:
    """The value stored under `name` for `key`, or None (no file, another key, anything broken).
    `object_hook` (json's) rebuilds the value as it is parsed; it raises ValueError or TypeError
    on what it does not know, which is a miss too."""
    if os.environ.get(OFF_ENV):
        return None
    try:
        with open(path_for(name), "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            return None
        doc = json.loads(raw, object_hook=object_hook)
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("key") != key or "value" not in doc:
        return None
    return doc["value"]


def store(name: str, key: str, value: Any) -> None:
    """Write `value` under `name` for `key`, atomically; every failure is silent (a cache)."""
    if os.environ.get(OFF_ENV):
        return
    from .atomicfile import write_atomic

    try:
        text = json.dumps({"key": key, "value": value}, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)
        target = path_for(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, text, errors="surrogatepass")
    except (OSError, ValueError, TypeError, RecursionError, UnicodeError):
        pass
