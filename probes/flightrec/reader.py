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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from distdoctor.knowledge.errors import InputError
from distdoctor.knowledge.fswalk import walk
from distdoctor.knowledge.i18n import t
from distdoctor.knowledge.printable import clean, plain_text

MAX_BYTES = 256 * 1024 * 1024  # a 20000-entry buffer with stacks is tens of MiB; more is not a dump
MAX_FILES = 4096
# trace_rank_3, nccl_trace_rank_12, fr_trace_rank_0.json, dump.7.pkl: the rank ends the name
_RANK_NAME = re.compile(r"(\d+)(\.(json|pkl|pickle))?$")


class DumpError(InputError):
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


LIMIT = 1 << 63  # a SeqNum, a time or a status past this is not one: read as absent
MAX_RANK = 1 << 17  # a rank past 131072 (from a file name or pg_config) is not a rank
FIELD_CHARS = 1024  # a field's text (sizes, names) is cut here: real ones are tens of characters
DUMP_CHARS = 32 << 20  # all fields of one dump together; past it each field keeps 32 characters
MAX_DTYPES = 64


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value if -LIMIT < value < LIMIT else default
    if isinstance(value, str) and len(value) <= 24:
        try:
            number = int(value)
        except ValueError:
            return default
        return number if -LIMIT < number < LIMIT else default
    return default


class _Texts:
    """The text of a dump's fields, bounded: shared objects (a pickle can reference one list a
    billion times) are expanded once per budget, and all fields of the dump together are capped."""

    def __init__(self) -> None:
        self.memo: dict[int, str] = {}
        self.short: dict[str, str] = {}  # "0", "gloo:all_reduce", "Float": thousands of times
        self.spent = 0

    def __call__(self, raw: Any, cap: int = FIELD_CHARS) -> str:
        if type(raw) is str and len(raw) <= 64:
            text = self.short.get(raw)
            if text is None:
                text = raw if raw.isascii() and raw.isprintable() else clean(raw)
                if len(self.short) < 4096:
                    self.short[raw] = text
            return text
        if self.spent > DUMP_CHARS:
            cap = 32
        text = clean(raw, cap) if isinstance(raw, str) else plain_text(raw, cap, self.memo,
                                                                        tuples_as_lists=True)
        self.spent += len(text)
        return clean(text)


def _frames(raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list):
        return ()
    out = []
    for frame in raw[:64]:
        if isinstance(frame, dict):
            out.append(f"{clean(frame.get('name', '?'), 200)} ({clean(frame.get('filename', '?'), 400)}:"
                       f"{clean(frame.get('line', '?'), 20)})")
    return tuple(out)


def _entry(raw: Any, text: _Texts) -> Entry | None:
    if not isinstance(raw, dict):
        return None
    get = raw.get
    pg = get("process_group")
    name, desc = ("", "")
    if isinstance(pg, (list, tuple)) and len(pg) >= 2:
        name, desc = text(pg[0], 200), text(pg[1], 200)
    profiling = get("profiling_name")
    profiling = text(profiling, 200) if isinstance(profiling, str) else ""
    backend, _, rest = profiling.partition(":")
    op = (rest or backend).split(" ", 1)[0] if profiling else "?"
    ins, outs = get("input_dtypes"), get("output_dtypes")
    dt = _dtypes(ins, text) + _dtypes(outs, text)
    p2p = get("is_p2p") is True
    seq = get("p2p_seq_id" if p2p else "collective_seq_id")
    return Entry(name, desc, _int(seq, -1), p2p, op,
                 backend if rest else "", _size_text(get("input_sizes"), text),
                 _size_text(get("output_sizes"), text), dt, text(get("state") or "", 64),
                 get("retired") is True, _int(get("time_created_ns")), get("frames"))
    # dtypes stay as recorded (strings in every dump seen); they are only compared and printed


def _dtypes(raw: Any, text: _Texts) -> tuple[str, ...]:
    # a list in real dumps; a bare string in the dumps fr_trace's own tests build
    if isinstance(raw, (list, tuple)):
        return tuple(map(text, raw[:MAX_DTYPES]))
    return (text(raw, 64),) if isinstance(raw, str) and raw else ()


def _small_ints(raw: list[Any]) -> bool:
    """[[4], [1024, 1024]]: the shape of every real size list, printed by str() at C speed."""
    if len(raw) > 64:
        return False
    for sub in raw:
        if type(sub) is not list or len(sub) > 8:
            return False
        for x in sub:
            if type(x) is not int or not -LIMIT < x < LIMIT:
                return False
    return True


def _size_text(raw: Any, text: _Texts) -> str:
    if type(raw) is list and _small_ints(raw):
        return str(raw)
    # a tuple where JSON has a list: print both the same way
    return text(raw) if isinstance(raw, (list, tuple)) else "?"


def _config(raw: Any, text: _Texts) -> dict[str, dict[str, Any]]:
    """pg_config with its names as bounded text and its ranks as a list of ints (None when
    absent or not a list of ranks)."""
    out: dict[str, dict[str, Any]] = {}
    if not isinstance(raw, dict):
        return out
    for key, conf in raw.items():
        if not isinstance(conf, dict) or len(out) >= MAX_RANK:
            continue
        out[text(key, 200)] = {"name": text(conf.get("name") or "", 200),
                               "desc": text(conf.get("desc") or "", 200),
                               "ranks": parse_ranks(conf.get("ranks"))}
    return out


_RANKS_TEXT = re.compile(r"[\s\[\](),0-9]*")
_DIGITS = re.compile(r"\d{1,8}")


def parse_ranks(raw: Any) -> list[int] | None:
    """'[0, 1, 2]' or [0, 1, 2] as a list of ranks; None when it is anything else, holds more
    than MAX_RANK ranks, or a rank past MAX_RANK (never literal_eval on a 15 MB string)."""
    if isinstance(raw, str):
        if not _RANKS_TEXT.fullmatch(raw):
            return None
        ranks = []
        for n, m in enumerate(_DIGITS.finditer(raw)):
            if n >= MAX_RANK:
                return None
            ranks.append(int(m.group(0)))
    elif isinstance(raw, (list, tuple)):
        if len(raw) > MAX_RANK or not all(type(r) is int for r in raw):
            return None
        ranks = list(raw)
    else:
        return None
    return ranks if all(0 <= r < MAX_RANK for r in ranks) else None


def _status(raw: Any, text: _Texts) -> dict[str, dict[str, Any]]:
    """pg_status: per group, its counters as ints (an absent or absurd one left out)."""
    out: dict[str, dict[str, Any]] = {}
    if not isinstance(raw, dict):
        return out
    for key, values in raw.items():
        if isinstance(values, dict) and len(out) < MAX_RANK:
            out[text(key, 200)] = {str(k): _int(v, -1) for k, v in values.items()
                                   if isinstance(k, str) and len(k) < 64 and _int(v, -1) >= 0}
    return out


def parse_dump(data: bytes, path: str, rank: int) -> RankDump:
    """One rank's dump from its bytes (JSON or pickle, told apart by the first byte)."""
    head = data.lstrip()[:1]
    if head == b"{":
        fmt = "json"
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError, MemoryError) as exc:
            # ValueError: JSONDecodeError, and an integer past the int-to-str digit limit
            raise DumpError(t("{path}: unreadable JSON dump ({why})", path=path,
                              why=clean(str(exc) or type(exc).__name__, 200))) from None
    elif data[:1] == b"\x80":
        fmt = "pickle"
        try:
            doc = loads_plain(data)
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError,
                AttributeError, UnicodeDecodeError, MemoryError, RecursionError, OverflowError) as exc:
            raise DumpError(t("{path}: unreadable pickle dump ({why})", path=path,
                              why=clean(str(exc) or type(exc).__name__, 200))) from None
    else:
        raise DumpError(t("{path}: not a Flight Recorder dump (neither JSON nor pickle)", path=path))
    if not isinstance(doc, dict) or not isinstance(doc.get("entries", []), list):
        raise DumpError(t("{path}: not a Flight Recorder dump (no 'entries' list)", path=path))
    text = _Texts()
    entries = tuple(e for e in (_entry(raw, text) for raw in doc.get("entries") or []) if e is not None)
    return RankDump(rank=rank, path=path, fmt=fmt, version=text(doc.get("version") or "", 64),
                    entries=entries, pg_config=_config(doc.get("pg_config"), text),
                    pg_status=_status(doc.get("pg_status"), text))


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
            if int(match.group(1)) >= MAX_RANK:
                raise DumpError(t("{top}: rank {rank} in the file name is past {most}", top=top,
                                  rank=clean(match.group(1), 24), most=MAX_RANK))
            found.append((int(match.group(1)), top))
            continue
        if not top.is_dir():
            # the value of TORCH_FR_DUMP_TEMP_FILE itself (/tmp/nccl_trace_rank_): a prefix
            prefixed = _with_prefix(top)
            if not prefixed:
                raise DumpError(t("{top}: no such file or folder (nor files starting with it)", top=top))
            found += prefixed
            continue
        for root, dirs, files in walk(top):
            dirs.sort()
            for name in sorted(files):
                match = _RANK_NAME.search(name)
                if match and not name.startswith(".") and len(match.group(1)) <= 7 \
                        and int(match.group(1)) < MAX_RANK:
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
            if match and len(match.group(1)) <= 7 and int(match.group(1)) < MAX_RANK \
                    and (folder / name).is_file():
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
