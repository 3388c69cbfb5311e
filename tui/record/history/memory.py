"""What commands call: record a concluded diagnosis, and recall what was seen before (the same
failure, the same node) with what fixed it. None of these raises to its caller: a store that
cannot be used costs one line on stderr (or through `on_error`), never the command's result."""
from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from distdoctor.knowledge.i18n import t

from . import CONCLUDING
from .incident import Incident, from_diagnosis, iso
from .store import HistoryError, IncidentStore

# Causes that live in a node's hardware or network: the same culprit host with one of these is
# "seen before" even when the failure line differs. (The knowledge base has no such category
# yet; when causes.toml gets one, read it from there.)
HOST_CAUSES = frozenset({"network-unreachable", "nic-selection", "p2p-unsupported", "ib-rdma-failure",
                         "shm-insufficient"})
REPEAT_COUNT = 3  # a host culprit in this many incidents ...
REPEAT_DAYS = 30  # ... within this many days is a repeat offender
SEEN_LIMIT = 5
SESSIONS_IMPORTED = "sessions_imported"

OnError = Callable[[str], None]


def _say(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # stderr closed: nowhere left to say it


def _fail(on_error: OnError | None, exc: BaseException) -> None:
    # a HistoryError says "incident history PATH: why" already
    why = str(exc) if isinstance(exc, HistoryError) else t("incident history: {why}", why=f"{type(exc).__name__}: {exc}")
    (on_error or _say)(t("distdoctor: {why}", why=why.splitlines()[0] if why else ""))


def open_store(db: str | Path | None = None, *, import_sessions: bool = True) -> IncidentStore:
    """The store at `db` (else $DISTDOCTOR_DB, else the state folder); the first open of a store
    imports the saved session files into it, once."""
    store = IncidentStore.open(db)
    try:
        if import_sessions and store.meta(SESSIONS_IMPORTED) is None:
            import_session_files(store)
    except BaseException:
        store.close()
        raise
    return store


# --- recording ---------------------------------------------------------------------------------

def record_diagnosis(diagnosis: Mapping[str, Any], *, session_id: str | None = None,
                     hosts: Iterable[str] | Mapping[str, str] | None = None,
                     versions: Mapping[str, Any] | None = None, job: str | None = None,
                     culprit_host: str | None = None, first_line: str | None = None,
                     source: str = "diagnosis", db: str | Path | None = None,
                     on_error: OnError | None = None, now: float | None = None) -> int | None:
    """Store a diagnosis (`logs --json`'s dict, the app's conclusion, or a Diagnosis dict) and
    return the incident's id; with a session id, the session's incident is updated instead of
    a new one added. None, and one line through `on_error` (stderr by default), when the
    store cannot take it."""
    try:
        inc = from_diagnosis(diagnosis, session_id=session_id, hosts=hosts, versions=versions, job=job,
                             source=source, culprit_host=culprit_host, first_line=first_line, now=now)
        if session_id:
            inc.uid = session_uid(session_id, _saved_session(session_id))
        with open_store(db) as store:
            return store.merge_session(inc, keep=_KEEP) if session_id else store.add(inc)
    except Exception as exc:  # the caller's result matters more than the history: reported, not raised
        _fail(on_error, exc)
        return None


# What a later step in a session (the app's conclusion, a bisection) does not know and the
# session's incident keeps from the logs step.
_KEEP = ("first_line", "signature", "signature_text", "hosts", "ranks", "culprit_host", "culprit_ranks",
         "role", "versions", "summary", "causes", "confidence")


def _merge(store: IncidentStore, inc: Incident, kind: str) -> int:
    """The session's incident updated by an event of `kind`: the logs replace it, the app's
    conclusion fills it, a repro or a bisection only adds to it."""
    return store.merge_session(inc, keep=_KEEP if kind != "logs" else (), only_adds=kind in ("repro", "bisect"))


def incident_from_event(kind: str, data: Any, session_id: str | None, now: float | None = None) -> Incident | None:
    """The incident a session event concludes, or None when it concludes nothing (a healthy
    log, a passing repro, a bisection that found no switch)."""
    if not isinstance(data, Mapping) or kind not in CONCLUDING:
        return None
    if kind == "logs":
        if not (data.get("verdict") or {}).get("failed"):
            return None
        return from_diagnosis(data, session_id=session_id, source="logs", now=now)
    if kind in ("conclusion", "diagnosis"):
        if not data.get("causes") and not data.get("culprit"):
            return None
        return from_diagnosis(data, session_id=session_id, source=kind, now=now)
    if kind == "repro":
        if data.get("outcome") in ("pass", "stopped", None):
            return None
        first = {"text": str(data.get("first_error") or "")} if data.get("first_error") else None
        return from_diagnosis({"causes": data.get("causes") or [], "first_failure": first,
                               "outcome": f"repro {data.get('outcome')}", "failed": True},
                              session_id=session_id, source="repro", now=now)
    verdict = data.get("verdict")  # bisect
    if not isinstance(verdict, Mapping) or not verdict.get("switch"):
        return None
    inc = from_diagnosis({"causes": [{"id": c} for c in verdict.get("causes") or [] if c],
                          "outcome": "bisected", "failed": True}, session_id=session_id, source="bisect", now=now)
    inc.fix_switch = str(verdict.get("env") or verdict.get("switch"))
    return inc


def _saved_session(session_id: str) -> Mapping[str, Any] | None:
    """The saved session of that id, for its creation time; None when there is none to read."""
    from ..session import SessionError, SessionStore

    try:
        return SessionStore().load(session_id)
    except SessionError:
        return None


def session_uid(session_id: str, record: Mapping[str, Any] | None = None) -> str:
    """The uid of a session's incident, the same whether it was recorded live or imported from
    the session file later (in this store or another): the session's id and creation time."""
    created = record.get("created") if record else None
    if isinstance(created, (int, float)) and not isinstance(created, bool):
        return f"session-{session_id}-{int(created)}"
    return f"session-{session_id}"


def record_event(session_id: str | None, kind: str, data: Any, *, record: Mapping[str, Any] | None = None,
                 db: str | Path | None = None, on_error: OnError | None = None,
                 now: float | None = None) -> int | None:
    """The session hook: a command's or the app's event that concludes something updates the
    session's incident (one per session); a `check` gives the incident its versions. `record`
    is the session as saved: its creation time makes the incident's uid, its latest check the
    versions. Never raises; returns the incident id or None."""
    try:
        if kind == "check":
            versions = check_versions(data)
            if not session_id or not versions:
                return None
            with open_store(db) as store:
                return store.set_versions(session_uid(session_id, record), versions)
        inc = incident_from_event(kind, data, session_id, now)
        if inc is None:
            return None
        if session_id:
            inc.uid = session_uid(session_id, record)
            inc.versions.update(session_versions(record))
        with open_store(db) as store:
            return _merge(store, inc, kind)
    except Exception as exc:  # see record_diagnosis
        _fail(on_error, exc)
        return None


def check_versions(data: Any) -> dict[str, str]:
    """torch, its CUDA, the NCCL loaded and the driver from a `check` result's version facts."""
    facts = data.get("facts") if isinstance(data, Mapping) else None
    found = facts.get("versions") if isinstance(facts, Mapping) else None
    if not isinstance(found, Mapping):
        return {}
    torch = found.get("torch") if isinstance(found.get("torch"), Mapping) else {}
    nccl = found.get("nccl") if isinstance(found.get("nccl"), Mapping) else {}
    driver = found.get("driver") if isinstance(found.get("driver"), Mapping) else {}
    nccl_versions = nccl.get("versions") if isinstance(nccl.get("versions"), list) else []
    out = {"torch": torch.get("version"), "cuda": torch.get("cuda"),
           "nccl": nccl.get("loaded") or (nccl_versions[0] if nccl_versions else None),
           "driver": driver.get("version") or driver.get("driver")}
    return {k: str(v) for k, v in out.items() if v and isinstance(v, (str, int, float))}


def session_versions(record: Mapping[str, Any] | None) -> dict[str, str]:
    """The versions of the session's latest `check`, if it ran one."""
    events = record.get("events") if record else None
    for event in reversed(events if isinstance(events, list) else []):
        if isinstance(event, Mapping) and event.get("kind") == "check":
            return check_versions(event.get("data"))
    return {}


def import_session_files(store: IncidentStore, directory: Path | None = None) -> int:
    """Fold every saved session's events into the store, once per store (a meta key says it was
    done); returns how many sessions gave an incident. An unreadable session is skipped."""
    from ..session import SessionError, SessionStore, events_of

    if not store.set_meta_once(SESSIONS_IMPORTED, iso(time.time()) or ""):
        return 0  # another process got there first
    try:
        records = SessionStore(directory).list()
    except SessionError:
        return 0  # no sessions folder (or a file in its place): nothing to import
    found = 0
    for record in reversed(records):  # oldest first, so ids follow time
        session_id = str(record.get("id"))
        got = False
        for event in events_of(record):
            stamp = event.get("time") if isinstance(event.get("time"), (int, float)) else record.get("created")
            inc = incident_from_event(str(event.get("kind")), event.get("data"), session_id,
                                      float(stamp) if isinstance(stamp, (int, float)) else None)
            if inc is not None:
                inc.uid = session_uid(session_id, record)  # as when recorded live
                inc.versions.update(session_versions(record))
                _merge(store, inc, str(event.get("kind")))
                got = True
        found += got
    return found


# --- recalling ---------------------------------------------------------------------------------

def seen_before(signature: str | None, culprit_host: str | None = None, causes: Iterable[Any] = (), *,
                session_id: str | None = None, exclude: Iterable[int] = (), limit: int = SEEN_LIMIT,
                db: str | Path | IncidentStore | None = None,
                on_error: OnError | None = None) -> list[dict[str, Any]]:
    """Past incidents like this one, resolved ones first, then newest: the same failure
    signature, or the same culprit host when one of `causes` (ids or {"id"} dicts) is a
    hardware or network cause. [{"id", "time", "resolution", "why", ...}]; [] on any error (one
    line through `on_error`). Incidents of `session_id` itself are left out."""
    cause_ids = [str(c.get("id") if isinstance(c, Mapping) else c) for c in causes or ()]
    host_causes = [c for c in cause_ids if c in HOST_CAUSES]
    skip = set(exclude)
    found: dict[int, tuple[Incident, str]] = {}

    def take(rows: list[Incident], why: str, host: bool = False) -> None:
        for inc in rows:
            if inc.id in found or inc.id in skip or (session_id and inc.session == session_id):
                continue
            if (host and inc.culprit_host != culprit_host) or (not host and len(signature or "") >= 12
                                                                and inc.signature != signature):
                continue
            found[int(inc.id or 0)] = (inc, why)

    try:
        with _opened(db) as store:
            # what fixed it matters most: resolved ones first, however old, then the newest
            for resolved in (True, None):
                if signature:
                    take(store.query(signature=signature, resolved=resolved, limit=limit + len(skip) + 5),
                         t("same failure signature {signature}", signature=signature))
                if culprit_host and host_causes:
                    take(store.query(culprit=culprit_host, resolved=resolved, limit=limit + len(skip) + 5),
                         t("same culprit host {host} with a hardware or network cause ({causes})",
                           host=culprit_host, causes=", ".join(host_causes)), host=True)
    except Exception as exc:  # recall is a bonus: never the reason a verdict is lost
        _fail(on_error, exc)
        return []
    rows = sorted(found.values(), key=lambda r: (r[0].resolution is None, -r[0].time))
    return [{"id": inc.id, "time": iso(inc.time), "resolution": inc.resolution, "why": why,
             "culprit_host": inc.culprit_host, "fix_switch": inc.fix_switch} for inc, why in rows[:limit]]


def repeat_offenders(*, days: int = REPEAT_DAYS, threshold: int = REPEAT_COUNT,
                     db: str | Path | IncidentStore | None = None, scheduler: str | None = None,
                     now: float | None = None, host: str | None = None,
                     on_error: OnError | None = None) -> list[dict[str, Any]]:
    """Hosts (or only `host`) that were the culprit in `threshold` or more incidents in the last
    `days`, most first, each with its causes and the command that takes it out of the scheduler
    (printed, never run)."""
    try:
        with _opened(db) as store:
            rows = store.culprit_counts((now or time.time()) - days * 86400, at_least=threshold, host=host)
    except Exception as exc:  # see seen_before
        _fail(on_error, exc)
        return []
    return [{**row, "last": iso(row["last"]), "commands": drain_commands(row["host"], row["incidents"], days,
                                                                         scheduler)}
            for row in rows]


@contextlib.contextmanager
def _opened(db: str | Path | IncidentStore | None) -> Iterator[IncidentStore]:
    """The store `db` names (opened and closed here), or `db` itself when it is an open one."""
    if isinstance(db, IncidentStore):
        yield db
        return
    with open_store(db) as store:
        yield store


def repeat_offender(host: str | None, **options: Any) -> dict[str, Any] | None:
    """The repeat-offender entry for `host`, or None."""
    if not host:
        return None
    return next(iter(repeat_offenders(host=host, **options)), None)


def detect_scheduler() -> str | None:
    """"slurm" or "kubernetes" from the environment or the tools on PATH; None when neither."""
    import shutil

    if any(k.startswith("SLURM_") for k in os.environ) or shutil.which("scontrol"):
        return "slurm"
    if os.environ.get("KUBERNETES_SERVICE_HOST") or shutil.which("kubectl"):
        return "kubernetes"
    return None


def drain_commands(host: str, count: int, days: int = REPEAT_DAYS, scheduler: str | None = None) -> list[str]:
    """The commands that take `host` out of service for the scheduler in use (both when it
    cannot be told). Printed for a person to run, never run here."""
    import shlex

    scheduler = scheduler or detect_scheduler()
    reason = f"distdoctor: culprit in {count} incidents in {days} days"
    slurm = f"scontrol update nodename={shlex.quote(host)} state=drain reason={shlex.quote(reason)}"
    kube = [f"kubectl cordon {shlex.quote(host)}",
            f"kubectl drain {shlex.quote(host)} --ignore-daemonsets --delete-emptydir-data"]
    if scheduler == "slurm":
        return [slurm]
    if scheduler == "kubernetes":
        return kube
    return [slurm, *kube]


def recall(diagnosis: Mapping[str, Any], *, hosts: Iterable[str] | Mapping[str, str] | None = None,
           session_id: str | None = None, first_line: str | None = None,
           db: str | Path | IncidentStore | None = None, on_error: OnError | None = None) -> dict[str, Any]:
    """For a renderer holding a diagnosis (`logs --json`'s dict, or a Diagnosis dict with the
    logs' `first_line`): {"seen_before": [...], "repeat_offender": {...} | None, "signature": id}.
    Reads only; never raises."""
    try:
        inc = from_diagnosis(diagnosis, hosts=hosts, session_id=session_id, first_line=first_line)
        store = db if isinstance(db, IncidentStore) else open_store(db)
    except Exception as exc:  # a diagnosis of an unexpected shape, a store that cannot open: one line
        _fail(on_error, exc)
        return {"signature": None, "seen_before": [], "repeat_offender": None}
    try:
        seen = seen_before(inc.signature, inc.culprit_host, inc.cause_ids, session_id=session_id, db=store,
                           on_error=on_error)
        return {"signature": inc.signature, "seen_before": seen,
                "repeat_offender": repeat_offender(inc.culprit_host, db=store, on_error=on_error)}
    finally:
        if store is not db:
            store.close()


__all__ = ["record_diagnosis", "record_event", "seen_before", "repeat_offenders", "repeat_offender", "recall",
           "drain_commands", "open_store", "import_session_files", "session_uid"]
