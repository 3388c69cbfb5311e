"""Session records: every answer, loaded path and probe result, saved atomically after each change."""
from __future__ import annotations

import json
import os
import re
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
SCHEMA = 1


class SessionError(Exception):
    """A session that cannot be found, read or written; the message is one line."""


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "distdoctor" / "sessions"


def new_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(2).hex()


def write_atomic(path: Path, text: str) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class SessionStore:
    """One JSON file per session under the XDG state directory."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or state_dir()

    def path(self, session_id: str) -> Path:
        if not ID_RE.match(session_id):
            raise SessionError(f"bad session id {session_id!r}: letters, digits, '.', '_' and '-' only")
        return self.directory / f"{session_id}.json"

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
            raise SessionError(f"cannot save session {record['id']}: {exc.strerror or exc}") from None

    def load(self, session_id: str) -> dict[str, Any]:
        if session_id == "last":
            session_id = self.last_id()
        path = self.path(session_id)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise SessionError(f"no session {session_id!r} (see `distdoctor sessions`)") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SessionError(f"session {session_id!r} is unreadable: {exc}") from None
        if not isinstance(record, dict) or record.get("schema") != SCHEMA:
            raise SessionError(f"session {session_id!r} has an unknown format")
        return record

    def load_or_create(self, session_id: str) -> dict[str, Any]:
        try:
            return self.load(session_id)
        except SessionError:
            if session_id != "last" and not self.path(session_id).exists():
                return self.create(session_id)
            raise

    def append(self, session_id: str, kind: str, data: Any) -> dict[str, Any]:
        """Add one event (a step's result) and save at once."""
        record = self.load_or_create(session_id)
        record["events"].append({"kind": kind, "time": time.time(), "data": data})
        self.save(record)
        return record

    def list(self) -> list[dict[str, Any]]:
        """Readable sessions, newest first; unreadable files are skipped."""
        out = []
        for path in self.directory.glob("*.json"):
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                continue
            if isinstance(record, dict) and record.get("schema") == SCHEMA:
                out.append(record)
        return sorted(out, key=lambda r: r.get("updated", 0), reverse=True)

    def last_id(self) -> str:
        sessions = self.list()
        if not sessions:
            raise SessionError("no sessions yet: run `distdoctor` or a command with --session ID")
        return sessions[0]["id"]
