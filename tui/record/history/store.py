"""The incident store: one SQLite file (WAL, busy timeout), versioned, bounded, safe to share."""
from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from distdoctor.knowledge.errors import InputError
from distdoctor.knowledge.i18n import t

from . import default_path
from .incident import Incident
from .schema import NewerSchema, migrate

# The bound: the newest MAX_INCIDENTS incidents are kept (about 1 KB each, so about 100 MB at
# most); older ones are deleted every PRUNE_EVERY-th record and after an import.
MAX_INCIDENTS = 100_000
PRUNE_EVERY = 100
BUSY_TIMEOUT_S = 30.0  # a writer waits this long for another one (8 at once take milliseconds)
_COLUMNS = ("uid", "time", "session", "job", "source", "hosts", "ranks", "culprit_ranks", "culprit_host",
            "role", "outcome", "causes", "confidence", "summary", "first_line", "signature",
            "signature_text", "versions", "fix_switch", "resolution", "resolved_at")
_SELECT = "SELECT id, " + ", ".join(_COLUMNS) + " FROM incidents"
_JSON = {"hosts", "ranks", "culprit_ranks", "causes", "versions"}


class HistoryError(InputError):
    """The store cannot be opened, read or written; the message is one line (exit 2)."""


def _why(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text


class IncidentStore:
    """Incidents in one SQLite file. Open with `IncidentStore.open(path)`; every method takes
    its own short transaction, so several processes (commands on several nodes sharing a home)
    can write at once; a writer waits for another up to BUSY_TIMEOUT_S."""

    def __init__(self, conn: sqlite3.Connection, path: Path, limit: int = MAX_INCIDENTS) -> None:
        self.conn = conn
        self.path = path
        self.limit = limit

    @classmethod
    def open(cls, path: Path | str | None = None, *, limit: int = MAX_INCIDENTS,
             busy_timeout: float = BUSY_TIMEOUT_S) -> IncidentStore:
        """Open (creating it and its folder when missing) and migrate; HistoryError otherwise."""
        path = Path(path) if path else default_path()
        try:
            if path.exists() and not path.is_file():
                raise HistoryError(t("incident history {path}: not a regular file", path=path))
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(path), timeout=busy_timeout, isolation_level=None,
                                   check_same_thread=False)
        except OSError as exc:
            raise HistoryError(t("incident history {path}: {why}", path=path, why=exc.strerror or exc)) from None
        except sqlite3.Error as exc:
            raise HistoryError(t("incident history {path}: {why}", path=path, why=_why(exc))) from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL: a killed process loses nothing
            if hasattr(conn, "setconfig"):  # Python 3.12+: the WAL is checkpointed as it grows, not at
                # every close, so a command's record costs no fsync (a power cut may lose the last few)
                conn.setconfig(sqlite3.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, True)
            conn.execute("PRAGMA foreign_keys = ON")
            migrate(conn)
        except NewerSchema as exc:
            conn.close()
            raise HistoryError(t("incident history {path}: written by a newer distdoctor (schema {version})",
                                 path=path, version=exc)) from None
        except sqlite3.Error as exc:
            conn.close()
            raise HistoryError(t("incident history {path}: {why} (move the file away to start a new one)",
                                 path=path, why=_why(exc))) from None
        return cls(conn, path, limit)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> IncidentStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- writing -------------------------------------------------------------------------------

    def _tx(self) -> _Transaction:
        return _Transaction(self)

    def add(self, incident: Incident) -> int:
        """Insert (redacted) and return the new id; an incident whose uid is already here is
        left as it is and its id returned."""
        inc = incident.redacted()
        with self._tx() as conn:
            found = conn.execute("SELECT id FROM incidents WHERE uid = ?", (inc.uid,)).fetchone()
            if found:
                return int(found[0])
            new_id = self._insert(conn, inc)
        if new_id % PRUNE_EVERY == 0:
            self.prune()
        return new_id

    def _insert(self, conn: sqlite3.Connection, inc: Incident) -> int:
        cur = conn.execute(f"INSERT INTO incidents ({', '.join(_COLUMNS)}) VALUES "
                           f"({', '.join('?' * len(_COLUMNS))})", _row(inc))
        new_id = int(cur.lastrowid or 0)
        self._index(conn, new_id, inc)
        return new_id

    def _index(self, conn: sqlite3.Connection, incident_id: int, inc: Incident) -> None:
        conn.execute("DELETE FROM incident_causes WHERE incident_id = ?", (incident_id,))
        conn.execute("DELETE FROM incident_hosts WHERE incident_id = ?", (incident_id,))
        conn.executemany("INSERT INTO incident_causes VALUES (?, ?, ?)",
                         [(incident_id, c["id"], c.get("confidence")) for c in inc.causes if c.get("id")])
        hosts = set(inc.hosts) | ({inc.culprit_host} if inc.culprit_host else set())
        conn.executemany("INSERT INTO incident_hosts VALUES (?, ?)", [(incident_id, h) for h in sorted(hosts)])

    def merge_session(self, incident: Incident, *, keep: Iterable[str] = (), only_adds: bool = False) -> int:
        """One incident per session: update the session's incident with what `incident` knows
        (fields in `keep` are kept from the stored one when the new one has none; with
        `only_adds`, every field the stored one has is kept: a repro or a bisection adds to the
        job's own diagnosis, never replaces it), or add it."""
        if not incident.session:
            return self.add(incident)
        inc = incident.redacted()
        with self._tx() as conn:
            # by uid (the session's id and creation time): another team's session of the same
            # name, imported here, is another incident
            row = conn.execute(_SELECT + " WHERE uid = ?", (inc.uid,)).fetchone()
            if row is None:
                return self._insert(conn, inc)
            old = _incident(row)
            inc.id, inc.uid, inc.time = old.id, old.uid, old.time
            for name in (_COLUMNS if only_adds else set(keep) | {"resolution", "resolved_at", "fix_switch", "job"}):
                if getattr(inc, name) in (None, "", [], {}) or (only_adds and getattr(old, name) not in
                                                                 (None, "", [], {}) and name != "fix_switch"):
                    setattr(inc, name, getattr(old, name))
            inc.versions = {**old.versions, **inc.versions}
            conn.execute(f"UPDATE incidents SET {', '.join(f'{c} = ?' for c in _COLUMNS)} WHERE id = ?",
                         (*_row(inc), old.id))
            self._index(conn, int(old.id or 0), inc)
            return int(old.id or 0)

    def set_versions(self, uid: str, versions: dict[str, str]) -> int | None:
        """Add `versions` to the incident `uid` (a session's), if there is one; its id, else None."""
        with self._tx() as conn:
            row = conn.execute("SELECT id, versions FROM incidents WHERE uid = ?", (uid,)).fetchone()
            if row is None:
                return None
            merged = {**_load(row[1], {}), **versions}
            conn.execute("UPDATE incidents SET versions = ? WHERE id = ?", (json.dumps(merged, sort_keys=True), row[0]))
            return int(row[0])

    def resolve(self, incident_id: int, text: str, now: float | None = None) -> bool:
        """Set what fixed it; False when there is no such incident."""
        from ..redact import redact_text

        with self._tx() as conn:
            cur = conn.execute("UPDATE incidents SET resolution = ?, resolved_at = ? WHERE id = ?",
                               (redact_text(text)[:500], now or time.time(), incident_id))
            return cur.rowcount > 0

    def prune(self) -> int:
        """Delete the oldest incidents past the limit; returns how many went."""
        with self._tx() as conn:
            count = conn.execute("SELECT count(*) FROM incidents").fetchone()[0]
            excess = count - self.limit
            if excess <= 0:
                return 0
            conn.execute("DELETE FROM incidents WHERE id IN "
                         "(SELECT id FROM incidents ORDER BY time, id LIMIT ?)", (excess,))
            return int(excess)

    def import_incidents(self, incidents: Iterable[Incident]) -> tuple[int, int]:
        """Add incidents from an export: (added, updated). A uid already here is the same
        incident: only a resolution it lacks is taken."""
        added = updated = 0
        with self._tx() as conn:
            for incident in incidents:
                inc = incident.redacted()
                row = conn.execute("SELECT id, resolution FROM incidents WHERE uid = ?", (inc.uid,)).fetchone()
                if row is None:
                    self._insert(conn, inc)
                    added += 1
                elif not row[1] and inc.resolution:
                    conn.execute("UPDATE incidents SET resolution = ?, resolved_at = ? WHERE id = ?",
                                 (inc.resolution, inc.resolved_at, row[0]))
                    updated += 1
        self.prune()
        return added, updated

    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta_once(self, key: str, value: str) -> bool:
        """Set `key` unless another process did first; True when this call set it."""
        with self._tx() as conn:
            cur = conn.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (key, value))
            return cur.rowcount > 0

    # --- reading -------------------------------------------------------------------------------

    def get(self, incident_id: int) -> Incident | None:
        row = self._read(_SELECT + " WHERE id = ?", (incident_id,))
        return _incident(row[0]) if row else None

    def query(self, *, node: str | None = None, cause: str | None = None, signature: str | None = None,
              since: float | None = None, limit: int | None = 20, session: str | None = None,
              resolved: bool | None = None, culprit: str | None = None) -> list[Incident]:
        """Newest first, filtered: `node` any host of the incident, `culprit` the culprit host,
        `signature` a whole signature or its first hex digits; each filter has an index."""
        where: list[str] = []
        params: list[Any] = []

        def add(sql: str, *values: Any) -> None:
            where.append(sql)
            params.extend(values)

        if node:
            add("id IN (SELECT incident_id FROM incident_hosts WHERE host = ?)", node)
        if culprit:
            add("culprit_host = ?", culprit)
        if cause:
            add("id IN (SELECT incident_id FROM incident_causes WHERE cause = ?)", cause)
        if signature:
            # a range, not LIKE: SQLite's index serves LIKE only under a case-insensitive collation
            if len(signature) >= 12:
                add("signature = ?", signature)
            else:
                add("signature >= ? AND signature < ?", signature, signature + "\uffff")
        if since is not None:
            add("time >= ?", since)
        if session:
            add("session = ?", session)
        if resolved is not None:
            add("resolution IS NOT NULL" if resolved else "resolution IS NULL")
        sql = _SELECT + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY time DESC, id DESC" + (" LIMIT ?" if limit else "")
        return [_incident(r) for r in self._read(sql, (*params, *([limit] if limit else [])))]

    def culprit_counts(self, since: float, *, limit: int | None = None, at_least: int = 1,
                       host: str | None = None, causes: bool = True) -> list[dict[str, Any]]:
        """Per culprit host (or only `host`) since `since`, most culprit first (at most `limit`
        hosts, each the culprit `at_least` times): {"host", "incidents", "last", "causes":
        {cause: count}} (the causes only when asked: a query per host)."""
        rows = self._read("SELECT culprit_host, count(*), max(time) FROM incidents WHERE time >= ? AND "
                          + ("culprit_host = ? " if host else "culprit_host IS NOT NULL ")
                          + "GROUP BY culprit_host HAVING count(*) >= ? ORDER BY count(*) DESC, max(time) DESC"
                          + (" LIMIT ?" if limit else ""),
                          (since, *([host] if host else []), at_least, *([limit] if limit else [])))
        out = []
        for name, count, last in rows:
            found = self._read("SELECT c.cause, count(*) FROM incidents i JOIN incident_causes c ON "
                               "c.incident_id = i.id WHERE i.culprit_host = ? AND i.time >= ? "
                               "GROUP BY c.cause ORDER BY count(*) DESC, c.cause", (name, since)) if causes else []
            out.append({"host": name, "incidents": int(count), "last": float(last),
                        "causes": {c: int(n) for c, n in found}})
        return out

    def count(self) -> int:
        return int(self._read("SELECT count(*) FROM incidents")[0][0])

    def iter_all(self) -> Iterator[Incident]:
        """Every incident, oldest first (for export)."""
        try:
            for row in self.conn.execute(_SELECT + " ORDER BY time, id"):
                yield _incident(row)
        except sqlite3.Error as exc:
            raise HistoryError(t("incident history {path}: {why}", path=self.path, why=_why(exc))) from None

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise HistoryError(t("incident history {path}: {why}", path=self.path, why=_why(exc))) from None


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT (the write lock taken up front, so two writers never
    deadlock upgrading a read), ROLLBACK on any error; sqlite errors become HistoryError."""

    def __init__(self, store: IncidentStore) -> None:
        self.store = store

    def __enter__(self) -> sqlite3.Connection:
        try:
            self.store.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise HistoryError(t("incident history {path}: {why}", path=self.store.path, why=_why(exc))) from None
        return self.store.conn

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        conn = self.store.conn
        if kind is None:
            try:
                conn.execute("COMMIT")
                return False
            except sqlite3.Error as err:
                exc = err
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the transaction is already gone (the error ended it); the first error is the one to report
        if isinstance(exc, sqlite3.Error):
            raise HistoryError(t("incident history {path}: {why}", path=self.store.path, why=_why(exc))) from None
        return False


def _row(inc: Incident) -> tuple[Any, ...]:
    return tuple(json.dumps(getattr(inc, c), sort_keys=True) if c in _JSON else getattr(inc, c) for c in _COLUMNS)


def _incident(row: tuple[Any, ...]) -> Incident:
    """A row of _SELECT (id, then _COLUMNS) as an Incident."""
    values = dict(zip(_COLUMNS, row[1:]))
    for name in _JSON:
        values[name] = _load(values[name], {} if name == "versions" else [])
    return Incident(id=row[0], **values)


def _load(text: Any, default: Any) -> Any:
    try:
        value = json.loads(text) if isinstance(text, str) else default
    except ValueError:
        return default
    return value if isinstance(value, type(default)) else default
