"""Session records: every answer, loaded path and probe result, saved atomically after each change."""
from __future__ import annotations

import contextlib
import copy
import json
import os
import queue
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from distdoctor.knowledge import atomicfile, statedir
from distdoctor.knowledge.errors import InputError
from distdoctor.knowledge.i18n import t

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: appends are not serialised between processes
    fcntl = None  # type: ignore[assignment]

ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
SCHEMA = 1
PSEUDONYMS_SUFFIX = ".pseudonyms.json"
STALE_TMP_S = 3600  # a temporary file this old was left by a killed writer
SAVE_WAIT_S = 10.0  # how long the app waits for queued results to reach the session file


class SessionError(InputError):
    """A session that cannot be found, read or written; the message is one line."""


def state_dir() -> Path:
    """The sessions folder, in distdoctor's state folder (knowledge/statedir.py)."""
    return statedir.state_dir("sessions")


def new_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(2).hex()


def write_atomic(path: Path, text: str) -> None:
    """A session or report file: 0600 from the start, fsynced, renamed over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomicfile.write_atomic(path, text, durable=True)


class SessionStore:
    """One JSON file per session under the XDG state directory."""

    def __init__(self, directory: Path | None = None,
                 on_wait: Callable[[str], None] | None = None) -> None:
        self.directory = directory or state_dir()
        self.on_wait = on_wait  # told the session id when another process holds its lock
        self.skipped: list[tuple[str, str]] = []  # (file name, reason) from the last list()

    def path(self, session_id: str) -> Path:
        if not ID_RE.match(session_id) or session_id.endswith(".pseudonyms"):
            raise SessionError(t("bad session id {id}: letters, digits, '.', '_' and '-' only", id=repr(session_id)))
        return self.directory / f"{session_id}.json"

    def pseudonyms_path(self, session_id: str) -> Path:
        """Where the real-name -> token mapping of a pseudonymized report lives (never in a report)."""
        return self.path(session_id).with_name(f"{session_id}{PSEUDONYMS_SUFFIX}")

    @contextlib.contextmanager
    def locked(self, session_id: str) -> Iterator[None]:
        """Serialise read-modify-write of one session between processes (app + headless commands).
        The kernel drops the lock when its holder dies, even by SIGKILL."""
        path = self.path(session_id)
        if fcntl is None:
            yield
            return
        self.check_directory()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path.with_name(f".{session_id}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise SessionError(t("cannot lock session {id}: {why}", id=session_id, why=exc.strerror or exc)) from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if self.on_wait:
                    self.on_wait(session_id)  # a wait with no word looks like a hang
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def create(self, session_id: str | None = None, **fields: Any) -> dict[str, Any]:
        now = time.time()
        record = {"schema": SCHEMA, "id": session_id or new_id(), "created": now, "updated": now,
                  "host": socket.gethostname(), "symptom": None, "answers": {}, "events": []}
        record.update(fields)
        self.save(record)
        return record

    def save(self, record: dict[str, Any]) -> None:
        record["updated"] = time.time()
        try:
            write_atomic(self.path(record["id"]), json.dumps(record, indent=1, default=str))
        except OSError as exc:
            raise SessionError(t("cannot save session {id}: {why}", id=record["id"], why=exc.strerror or exc)) from None

    def load(self, session_id: str) -> dict[str, Any]:
        if session_id == "last":
            session_id = self.last_id()
        path = self.path(session_id)
        record, why = _read(path)
        if record is None:
            if why == "missing":
                raise SessionError(t("no session {id} (see `distdoctor sessions`)", id=repr(session_id)))
            raise SessionError(t("session {id} {why}", id=repr(session_id), why=why))
        return record

    def load_or_create(self, session_id: str) -> dict[str, Any]:
        try:
            return self.load(session_id)
        except SessionError:
            if session_id != "last" and not self.path(session_id).exists():
                return self.create(session_id)
            raise

    def check_appendable(self, session_id: str) -> None:
        """Raise SessionError now if append() would fail later (a bad id, a damaged file), so a
        long command learns it before its work, not after."""
        if not self.path(session_id).exists():
            return
        record = self.load(session_id)
        if not isinstance(record.get("events"), list):
            raise SessionError(t("session {id} is damaged: its events are not a list; fix {path} or use a new "
                                 "--session ID", id=repr(session_id), path=self.path(session_id)))

    def append(self, session_id: str, kind: str, data: Any) -> dict[str, Any]:
        """Add one event (a step's result) and save at once."""
        with self.locked(session_id):
            record = self.load_or_create(session_id)
            if not isinstance(record.get("events"), list):
                # a hand-edited or damaged file: refuse rather than overwrite what it holds
                raise SessionError(t("session {id} is damaged: its events are not a list; fix {path} or use a "
                                     "new --session ID", id=repr(session_id), path=self.path(session_id)))
            record["events"].append({"kind": kind, "time": time.time(), "data": data})
            self.save(record)
        return record

    def update(self, session_id: str, **fields: Any) -> dict[str, Any]:
        """Set top-level fields (symptom, answers, ...) under the lock, keeping every event another
        process appended meanwhile; use this or append(), not save() on a record held in memory."""
        with self.locked(session_id):
            record = self.load_or_create(session_id)
            record.update({k: v for k, v in fields.items() if k not in ("id", "schema", "events")})
            self.save(record)
        return record

    def check_directory(self) -> None:
        """SessionError when the sessions folder is something else (a file left in its place):
        reads would find "no sessions" and writes "File exists", both beside the point."""
        if self.directory.exists() and not self.directory.is_dir():
            raise SessionError(t("{path} is not a folder: move it away, or set XDG_STATE_HOME to another place",
                                 path=self.directory))

    def list(self) -> list[dict[str, Any]]:
        """Readable sessions, newest first; unreadable files are skipped and named in
        `self.skipped` as (file name, reason)."""
        self.check_directory()
        out = []
        self.skipped = []
        for path in sorted(self.directory.glob("*.json")):
            if path.name.endswith(PSEUDONYMS_SUFFIX) or not ID_RE.match(path.stem):
                continue
            record, why = _read(path)
            if record is None:
                self.skipped.append((path.name, why))
            else:
                out.append(record)
        return sorted(out, key=lambda r: _number(r.get("updated")), reverse=True)

    def summaries(self) -> list[dict[str, Any]]:
        """One line per session for `distdoctor sessions`, newest first."""
        return [summary(record) for record in self.list()]

    def remove_stale_tmp(self, max_age_s: float = STALE_TMP_S) -> int:
        """Delete temporary files that killed writers left behind; returns how many."""
        removed, now = 0, time.time()
        for path in self.directory.glob(".*.tmp"):
            try:
                if now - path.stat().st_mtime > max_age_s:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                continue  # another process cleaned it up first
        return removed

    def last_id(self) -> str:
        sessions = self.list()
        if not sessions:
            raise SessionError(t("no sessions yet: run `distdoctor` or a command with --session ID"))
        return sessions[0]["id"]


class SessionWriter:
    """Appends events in order on one daemon thread, so a slow or hung state directory (a home
    on NFS) never freezes the screen that recorded them; `flush` waits for what was queued."""

    def __init__(self, store: SessionStore, on_error: Callable[[str], None]) -> None:
        self.store = store
        self.on_error = on_error
        self._queue: queue.SimpleQueue[tuple[str, str, Any] | threading.Event] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def append(self, session_id: str, kind: str, data: Any) -> None:
        # a copy: the caller's dict may change after this returns, before it is written
        self._queue.put((session_id, kind, copy.deepcopy(data)))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="session-writer", daemon=True)
            self._thread.start()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything appended so far is on disk; False if that took over `timeout`."""
        if self._thread is None:
            return True
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            try:
                saved = self.store.append(*item)
            except SessionError as exc:
                self.on_error(str(exc))
                continue
            except Exception as exc:  # reported, and the writer lives on for the next event
                self.on_error(f"{type(exc).__name__}: {exc}")
                continue
            # the app's concluding steps go to the incident history too (it never raises)
            from .history import record_event

            record_event(*item, record=saved, on_error=self.on_error)


def _read(path: Path) -> tuple[dict[str, Any] | None, str]:
    """A session file's record, or None and why not ("missing" when there is no such file).
    The file name is the session's id: a record whose id field disagrees (a copied or
    hand-edited file) is loaded under its file name, so every id listed can be opened."""
    try:
        if not path.is_file():  # a FIFO named x.json would block the read
            return None, "missing" if not path.exists() else t("is unreadable: not a regular file")
        text = path.read_text(encoding="utf-8")
        if not text.strip():
            return None, t("is empty")
        record = json.loads(text)
    except FileNotFoundError:
        return None, "missing"
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: bad UTF-8 or JSON
        return None, t("is unreadable: {why}", why=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        return None, t("has an unknown format")
    record["id"] = path.stem
    return record, ""


def _number(value: Any) -> float:
    """A timestamp field as a number for sorting; anything else sorts as oldest."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def events_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's events that are objects; a damaged events field counts as none."""
    events = record.get("events")
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


def symptom_text(record: dict[str, Any]) -> str:
    """The session's symptom as short text: the record's field, else the latest classify event."""
    symptom = record.get("symptom")
    if not symptom:
        for event in reversed(events_of(record)):
            if event.get("kind") == "classify":
                symptom = event.get("data")
                break
    if isinstance(symptom, dict):
        parts = [str(symptom[k]) for k in ("symptom", "kind", "sub") if symptom.get(k)]
        return ": ".join(dict.fromkeys(parts))
    return str(symptom) if symptom else ""


def summary(record: dict[str, Any]) -> dict[str, Any]:
    """id, created, updated, host, symptom and the steps done (event kinds in first-seen order)."""
    events = events_of(record)
    kinds = list(dict.fromkeys(str(e.get("kind")) for e in events))
    return {"id": record.get("id"), "created": record.get("created"),
            "updated": record.get("updated"), "host": record.get("host"),
            "symptom": symptom_text(record), "events": len(events), "steps": kinds}
