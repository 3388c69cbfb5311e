"""Read Flight Recorder dumps (one file per rank, pickle or JSON) without running anyone's code.

A dump is what torch writes on a watchdog timeout (`TORCH_NCCL_DUMP_ON_TIMEOUT=1`, to
`TORCH_FR_DUMP_TEMP_FILE` + rank) or what `torch._C._distributed_c10d._dump_fr_trace[_json]()`
returns. The rank is the number the file name ends with (the dump itself does not say it).
Pickles go through an Unpickler whose find_class refuses every global: a dump holds only dicts,
lists, tuples, strings and numbers, so anything that names a class or a function is hostile or
not a dump, and is refused before it can run.
"""
from __future__ import annotations

import io
import json
import os
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, NamedTuple

from distdoctor.knowledge.i18n import t

MAX_BYTES = 256 * 1024 * 1024  # a 20000-entry buffer with stacks is tens of MiB; more is not a dump
MAX_FILES = 4096
# trace_rank_3, nccl_trace_rank_12, fr_trace_rank_0.json, dump.7.pkl: the rank ends the name
_RANK_NAME = re.compile(r"(\d+)(\.(json|pkl|pickle))?$")


class DumpError(Exception):
    """A dump that cannot be read: one line naming the file and why."""


class _PlainUnpickler(pickle.Unpickler):
    """Only containers and scalars: every global (class, function, reduce target) is refused."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: D401
        raise pickle.UnpicklingError(
            f"refused to load {module}.{name}: a Flight Recorder dump holds only plain data")


def loads_plain(data: bytes) -> Any:
    """Unpickle data made only of plain containers and scalars; raise UnpicklingError otherwise."""
    return _PlainUnpickler(io.BytesIO(data)).load()


class Entry(NamedTuple):
    """One collective (or point-to-point op) as one rank recorded it. A NamedTuple, not a frozen
    dataclass: a buffer holds thousands of entries per rank and this is built once per entry."""

    pg: str
    desc: str
    seq: int
    p2p: bool
    op: str
    backend: str
    input_sizes: str  # as printed, e.g. "[[4]]": compared as text, which is exact for int lists
    output_sizes: str
    dtypes: tuple[str, ...]
    state: str
    retired: bool
    time_ns: int
    raw_frames: Any = None

    @property
    def completed(self) -> bool:
        # NCCL marks state "completed"; Gloo leaves "scheduled" and only sets retired when the
        # work ended (successfully or with an error)
        return self.state == "completed" or self.retired

    @property
    def frames(self) -> tuple[str, ...]:
        return _frames(self.raw_frames)


@dataclass(frozen=True)
class RankDump:
    rank: int
    path: str
    fmt: str  # "json" or "pickle"
    version: str
    entries: tuple[Entry, ...]
    pg_config: dict[str, dict[str, Any]] = field(default_factory=dict)
    pg_status: dict[str, dict[str, Any]] = field(default_factory=dict)


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return default
    return default


def _frames(raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list):
        return ()
    out = []
    for frame in raw[:64]:
        if isinstance(frame, dict):
            out.append(f"{frame.get('name', '?')} ({frame.get('filename', '?')}:{frame.get('line', '?')})")
    return tuple(out)


def _entry(raw: Any) -> Entry | None:
    if not isinstance(raw, dict):
        return None
    get = raw.get
    pg = get("process_group")
    name, desc = ("", "")
    if isinstance(pg, (list, tuple)) and len(pg) >= 2:
        name, desc = str(pg[0]), str(pg[1])
    profiling = get("profiling_name")
    profiling = profiling if isinstance(profiling, str) else ""
    backend, _, rest = profiling.partition(":")
    op = (rest or backend).split(" ", 1)[0] if profiling else "?"
    ins, outs = get("input_dtypes"), get("output_dtypes")
    dt = _dtypes(ins) + _dtypes(outs)
    p2p = get("is_p2p") is True
    seq = get("p2p_seq_id" if p2p else "collective_seq_id")
    return Entry(name, desc, seq if type(seq) is int else _int(seq), p2p, op,
                 backend if rest else "", _size_text(get("input_sizes")),
                 _size_text(get("output_sizes")), dt, str(get("state") or ""),
                 get("retired") is True, _int(get("time_created_ns")), get("frames"))
    # dtypes stay as recorded (strings in every dump seen); they are only compared and printed


def _dtypes(raw: Any) -> tuple[str, ...]:
    # a list in real dumps; a bare string in the dumps fr_trace's own tests build
    if isinstance(raw, (list, tuple)):
        return tuple(raw)
    return (raw,) if isinstance(raw, str) and raw else ()


def _size_text(raw: Any) -> str:
    if type(raw) is list:
        return str(raw)
    # a tuple where JSON has a list: print both the same way
    if isinstance(raw, tuple):
        raw = [list(x) if isinstance(x, tuple) else x for x in raw]
    return str(raw) if isinstance(raw, list) else "?"


def parse_dump(data: bytes, path: str, rank: int) -> RankDump:
    """One rank's dump from its bytes (JSON or pickle, told apart by the first byte)."""
    head = data.lstrip()[:1]
    if head == b"{":
        fmt = "json"
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DumpError(t("{path}: unreadable JSON dump ({why})", path=path, why=exc)) from None
    elif data[:1] == b"\x80":
        fmt = "pickle"
        try:
            doc = loads_plain(data)
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError,
                AttributeError, UnicodeDecodeError, MemoryError, RecursionError) as exc:
            raise DumpError(t("{path}: unreadable pickle dump ({why})", path=path,
                                    why=exc or type(exc).__name__)) from None
    else:
        raise DumpError(t("{path}: not a Flight Recorder dump (neither JSON nor pickle)", path=path))
    if not isinstance(doc, dict) or not isinstance(doc.get("entries", []), list):
        raise DumpError(t("{path}: not a Flight Recorder dump (no 'entries' list)", path=path))
    entries = tuple(e for e in map(_entry, doc.get("entries") or []) if e is not None)
    config = doc.get("pg_config") if isinstance(doc.get("pg_config"), dict) else {}
    status = doc.get("pg_status") if isinstance(doc.get("pg_status"), dict) else {}
    return RankDump(rank=rank, path=path, fmt=fmt, version=str(doc.get("version") or ""),
                    entries=entries,
                    pg_config={str(k): v for k, v in config.items() if isinstance(v, dict)},
                    pg_status={str(k): v for k, v in status.items() if isinstance(v, dict)})


def read_file(path: Path, rank: int, max_bytes: int = MAX_BYTES) -> RankDump:
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise DumpError(t("{path}: {size} bytes, more than the {most} a dump may have", path=path, size=size,
                                    most=max_bytes))
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise DumpError(t("{path}: cannot read ({why})", path=path, why=exc.strerror or exc)) from None
    if not data.strip():
        raise DumpError(t("{path}: empty file, not a Flight Recorder dump", path=path))
    return parse_dump(data, str(path), rank)


def candidates(paths: Iterable[str]) -> list[tuple[int, Path]]:
    """(rank, file) for every file whose name ends with a rank number, under each path."""
    found: list[tuple[int, Path]] = []
    for given in paths:
        top = Path(given)
        if top.is_file():
            match = _RANK_NAME.search(top.name)
            if not match:
                raise DumpError(t("{top}: the file name must end with the rank (e.g. trace_rank_0)", top=top))
            found.append((int(match.group(1)), top))
            continue
        if not top.is_dir():
            # the value of TORCH_FR_DUMP_TEMP_FILE itself (/tmp/nccl_trace_rank_): a prefix
            prefixed = _with_prefix(top)
            if not prefixed:
                raise DumpError(t("{top}: no such file or folder (nor files starting with it)", top=top))
            found += prefixed
            continue
        for root, dirs, files in os.walk(top):
            dirs.sort()
            for name in sorted(files):
                match = _RANK_NAME.search(name)
                if match and not name.startswith("."):
                    found.append((int(match.group(1)), Path(root) / name))
                    if len(found) > MAX_FILES:
                        raise DumpError(t("{top}: more than {most} candidate files; give the folder that holds one dump "
                                          "per rank", top=top, most=MAX_FILES))
    return found


def _with_prefix(prefix: Path) -> list[tuple[int, Path]]:
    """(rank, file) for <prefix><rank>[.json|.pkl] in the prefix's folder."""
    folder = prefix.parent
    if not prefix.name or not folder.is_dir():
        return []
    found = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    for name in names:
        if name.startswith(prefix.name):
            match = re.fullmatch(r"(\d+)(\.(json|pkl|pickle))?", name[len(prefix.name):])
            if match and (folder / name).is_file():
                found.append((int(match.group(1)), folder / name))
    return found[:MAX_FILES + 1]


def read_dumps(paths: Iterable[str], max_bytes: int = MAX_BYTES) -> tuple[dict[int, RankDump], list[str]]:
    """Every rank's dump under the paths, and the files skipped (with why).

    A file named like a dump that is neither JSON nor pickle (train.log.1) is skipped; one that
    looks like a dump and is damaged, hostile or truncated is a DumpError. When a rank has both a
    pickle and a JSON dump (the same buffer written both ways), the pickle wins: it has stacks."""
    paths = list(paths)
    dumps: dict[int, RankDump] = {}
    skipped: list[str] = []
    for rank, path in candidates(paths):
        try:
            with open(path, "rb") as fh:
                head = fh.read(64).lstrip()[:1]
        except OSError as exc:
            raise DumpError(t("{path}: cannot read ({why})", path=path, why=exc.strerror or exc)) from None
        if head not in (b"{", b"\x80"):
            skipped.append(t("{path}: not JSON or pickle", path=path))
            continue
        dump = read_file(path, rank, max_bytes)
        old = dumps.get(rank)
        if old is not None:
            if old.fmt == dump.fmt:
                raise DumpError(t("two dumps for rank {rank}: {first} and {second}; give the folder of one run",
                                  rank=rank, first=old.path, second=dump.path))
            keep = dump if dump.fmt == "pickle" else old
            skipped.append(t("{path}: rank {rank} also in {other}", path=(old if keep is dump else dump).path,
                             rank=rank, other=keep.path))
            dump = keep
        dumps[rank] = dump
    if not dumps:
        where = ", ".join(paths)
        extra = f" ({len(skipped)} files named like one were not JSON or pickle)" if skipped else ""
        raise DumpError(t("{where}: no Flight Recorder dumps{extra}; expected one file per rank named "
                          "<prefix><rank>, e.g. nccl_trace_rank_0 as TORCH_FR_DUMP_TEMP_FILE writes", where=where,
                          extra=extra))
    return dumps, skipped
