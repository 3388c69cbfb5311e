"""Reading snapshot files one by one, keeping only the compared fields; bad files are reported.

A snapshot written by `collect` starts with schema, host and a few scalars, then the summary,
and ends with `"end": "<schema id>"`. For such a file only its head and its last bytes are
read: the summary is parsed alone, and identical summaries are parsed and validated once and
shared. Anything else (a missing trailer, other key order) is parsed whole, so a truncated,
foreign or newer-schema file is still told apart exactly.
"""
from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from typing import Any

from distdoctor.knowledge.i18n import t

from .schema import (
    NUMBER_HOOKS,
    SCHEMA_ID,
    SCHEMA_RE,
    SCHEMA_VERSION,
    SNAPSHOT_SCHEMA,
    bounds_problem,
    json_cut_short,
    validate,
)

_SUMMARY_SCHEMA = SNAPSHOT_SCHEMA["properties"]["summary"]
HEAD_BYTES = 8192
TAIL_BYTES = 256
MAX_BYTES = 64 << 20  # a snapshot is a few KiB; anything this big is not one
_STR = rb'"[^"\\]*(?:\\.[^"\\]*)*"'  # a JSON string, the unrolled form re matches fastest
_HEAD = re.compile(
    rb'\A\s*\{\s*"schema"\s*:\s*"(?P<schema>[^"\\]*)"\s*,\s*"host"\s*:\s*(?P<host>' + _STR + rb')'
    rb'(?:\s*,\s*' + _STR + rb'\s*:\s*(?:' + _STR + rb'|[-+.\w]+))*'  # scalar members only
    rb'\s*,\s*"summary"\s*:\s*')
_SCHEMA_BYTES = SCHEMA_ID.encode()
_TRAILER = re.compile(rb'"end"\s*:\s*"' + re.escape(SCHEMA_ID.encode()) + rb'"\s*\}\s*\Z')
_DECODER = json.JSONDecoder(**NUMBER_HOOKS)
# compare() reads these summary members; anything else in a summary is left out by name
_KNOWN = frozenset(_SUMMARY_SCHEMA["properties"])


def snapshot_files(paths: Iterable[str | os.PathLike[str]],
                   skipped: list[dict[str, str]]) -> Iterator[str]:
    """Each FILE as given and each DIR's *.json files in name order; missing paths are skipped."""
    for raw in paths:
        path = os.fspath(raw)
        if os.path.isdir(path):
            try:
                with os.scandir(path) as it:
                    # not is_dir(): a FIFO or dangling link named *.json is listed with its reason
                    names = sorted(e.name for e in it if e.name.endswith(".json") and not _is_dir(e))
            except OSError as exc:
                skipped.append({"file": path, "reason": t("cannot list: {why}", why=exc.strerror or exc)})
                continue
            if not names:
                skipped.append({"file": path, "reason": t("no *.json files in this folder")})
            for name in names:
                if _readable(os.path.join(path, name), skipped):
                    yield os.path.join(path, name)
        elif _readable(path, skipped):
            yield path


def _is_dir(entry: os.DirEntry) -> bool:
    """A symlink loop (or a vanished entry) is not a folder: listed, and skipped with its reason
    when read, instead of hiding every other snapshot of the folder."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _readable(path: str, skipped: list[dict[str, str]]) -> bool:
    """Whether a path is a regular file of a snapshot's size; if not, why goes to skipped."""
    try:
        st = os.stat(path)
    except OSError as exc:
        reason = t("no such file or folder") if isinstance(exc, FileNotFoundError) \
            else t("unreadable: {why}", why=exc.strerror or exc)
        skipped.append({"file": path, "reason": reason})
        return False
    # a FIFO would block the read and a device never ends: only regular files are opened
    if not stat.S_ISREG(st.st_mode):
        skipped.append({"file": path, "reason": t("not a regular file")})
        return False
    if st.st_size > MAX_BYTES:
        skipped.append({"file": path, "reason": t("too big for a snapshot ({size} MiB; a snapshot is a few KiB, at most "
                                                         "{most} MiB is read)", size=st.st_size >> 20,
                                                         most=MAX_BYTES >> 20)})
        return False
    return True


def read_record(path: str, cache: dict[str, dict[str, Any]] | None = None
                ) -> tuple[dict[str, Any] | None, str]:
    """The compact record of one snapshot file ({"node", "file", "fields"}), or None and why not.
    `cache` maps summary texts already seen to their parsed fields (shared between records)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        return None, t("unreadable: {why}", why=exc.strerror or exc)
    try:
        size = os.fstat(fd).st_size
        head = os.read(fd, HEAD_BYTES)
        tail = head[-TAIL_BYTES:] if size <= len(head) else os.pread(fd, TAIL_BYTES, size - TAIL_BYTES)
        if _TRAILER.search(tail):
            record = _fast_record(head, path, {} if cache is None else cache)
            if record is not None:
                return record, ""
        data = head if size <= len(head) else head + _read_rest(fd)
    except OSError as exc:
        return None, t("unreadable: {why}", why=exc.strerror or exc)
    finally:
        os.close(fd)
    return parse_record(data, path)


def _read_rest(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _fast_record(head: bytes, file: str, cache: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The record from the head alone, or None to fall back to parsing the whole file."""
    match = _HEAD.match(head)
    if not match or match["schema"] != _SCHEMA_BYTES:
        return None
    # a character cut at the end of the head lies past the summary, or the summary is cut too
    text = head[match.end():].decode("utf-8", "replace")
    raw_host = match["host"]
    try:
        summary, end = _DECODER.raw_decode(text)
        host = json.loads(raw_host) if b"\\" in raw_host else raw_host[1:-1].decode()
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, nesting past the stack
        return None  # the summary does not fit in the head, or the whole-file path names the problem
    key = text[:end]
    fields = cache.get(key)
    if fields is None:
        fields, problem = _summary_fields(summary)
        if problem:
            return None  # the whole-file path names the problem
        cache[key] = fields
    if not isinstance(host, str) or not host:
        return None
    return {"node": host, "file": file, "fields": fields}


def parse_record(data: bytes, file: str) -> tuple[dict[str, Any] | None, str]:
    """The record of a whole file's bytes, or None and why it cannot be compared."""
    if not data.strip():
        return None, "empty file"
    try:
        doc = json.loads(data, **NUMBER_HOOKS)
    except RecursionError:
        return None, t("not a usable JSON document: nested deeper than the parser's stack allows")
    except UnicodeDecodeError:
        return None, t("not JSON text (binary data?)")
    except json.JSONDecodeError as exc:
        if json_cut_short(data.decode(errors="replace").strip()):
            return None, t("truncated: the JSON stops at byte {n}", n=len(data))
        return None, t("not valid JSON: {error} (line {line}, column {column})", error=exc.msg, line=exc.lineno,
                       column=exc.colno)
    except ValueError as exc:
        # an integer longer than Python's 4300-digit limit
        return None, t("not a usable JSON document: {why}", why=str(exc).split(";")[0])
    return record_of(doc, file)


def record_of(doc: Any, file: str = "") -> tuple[dict[str, Any] | None, str]:
    """A document's compact record, or None and why it cannot be compared."""
    if not isinstance(doc, dict) or not isinstance(doc.get("schema"), str):
        return None, t("foreign file: not a distdoctor snapshot (no schema field)")
    schema = doc["schema"]
    if schema != SCHEMA_ID:
        match = SCHEMA_RE.match(schema)
        if match and int(match.group(1)) > SCHEMA_VERSION:
            return None, t("newer schema {schema}: this distdoctor reads {ours}; upgrade it (pip install -U "
                           "distdoctor) to compare this file", schema=schema, ours=SCHEMA_ID)
        return None, t("foreign file: schema {schema}, expected {ours}", schema=repr(schema), ours=SCHEMA_ID)
    host, summary = doc.get("host"), doc.get("summary")
    if not isinstance(host, str) or not host:
        return None, t("invalid snapshot: no host")
    if len(host) > 255:
        return None, t("invalid snapshot: a host name of {n} characters", n=len(host))
    fields, problem = _summary_fields(summary)
    if problem:
        return None, t("invalid snapshot: {problem}", problem=problem)
    return {"node": host, "file": file, "fields": fields}, ""


def _summary_fields(summary: Any) -> tuple[dict[str, Any], str]:
    """The summary members compare() reads, and the first problem with them ('' when none).
    Members outside the schema are left out unread, whatever they hold (deep, huge)."""
    if not isinstance(summary, dict):
        problems = validate(summary, _SUMMARY_SCHEMA, "$.summary")
        return {}, problems[0] if problems else "$.summary: expected object"
    fields = {k: v for k, v in summary.items() if k in _KNOWN}
    problem = bounds_problem(fields, "$.summary")
    if not problem:
        problems = validate(fields, _SUMMARY_SCHEMA, "$.summary")
        problem = problems[0] if problems else ""
    return fields, problem


def load_snapshots(paths: Iterable[str | os.PathLike[str]]
                   ) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Read DIR or FILE paths into compact records for compare(); truncated, foreign and
    newer-schema files are left out and listed as {"file", "reason"}. A file reached twice
    (`DIR DIR/a.json`, a link to it) is read once, as first given."""
    records: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    cache: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    for path in snapshot_files(paths, skipped):
        real = os.path.realpath(path)
        if real in seen:  # counted twice, one node would look like a majority of two
            continue
        seen.add(real)
        record, reason = read_record(path, cache)
        if record is None:
            skipped.append({"file": path, "reason": reason})
        else:
            records.append(record)
    return records, skipped
