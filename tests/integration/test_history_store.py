"""The incident store (issue 27): migrations from every older schema, redaction, the bound,
export/import, the one-time import of session files, "seen before", repeat offenders, and a
store that cannot be used costing one line, never a result."""
from __future__ import annotations

import functools
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from distdoctor.tui.record.history import (
    HistoryError,
    IncidentStore,
    open_store,
    recall,
    record_diagnosis,
    record_event,
    repeat_offenders,
    seen_before,
)
from distdoctor.tui.record.history.incident import Incident
from distdoctor.tui.record.history.memory import drain_commands
from distdoctor.tui.record.history.schema import MIGRATIONS, VERSION, migrate, version_of

RECORDED = Path(__file__).parents[1] / "fixtures" / "recorded"


@functools.cache
def _analysed(name: str) -> str:
    from distdoctor.knowledge import load_knowledge
    from distdoctor.knowledge.logs import analyse

    return json.dumps(analyse([str(RECORDED / name / "logs")], load_knowledge(None)).to_dict())


def diagnosis(name: str) -> dict[str, Any]:
    """`distdoctor logs --json`'s dict for a recorded set (a fresh copy each call)."""
    return json.loads(_analysed(name))


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "incidents.db"
    monkeypatch.setenv("DISTDOCTOR_DB", str(path))
    return path


# --- schema ------------------------------------------------------------------------------------

# A row as older schemas held it, written with that version's own columns (a schema that only
# added indexes takes the shape before it).
OLD_ROWS = {
    1: ("INSERT INTO incidents (time, hosts, culprit_host, causes, signature, resolution) VALUES "
        "(1700000000, '[\"node-1\", \"node-2\"]', 'node-2', '[{\"id\": \"nic-selection\"}]', 'abc123abc123', "
        "'replaced the cable')"),
    2: ("INSERT INTO incidents (time, hosts, culprit_host, causes, signature, uid, resolved_at) VALUES "
        "(1700000000, '[\"node-1\", \"node-2\"]', 'node-2', '[{\"id\": \"nic-selection\"}]', 'abc123abc123', "
        "'u-1', 1700000100)"),
}
# every writer filled the causes' table; 3's filled the hosts' one too
OLD_ROWS = {k: v + "; INSERT INTO incident_causes VALUES (1, 'nic-selection', NULL)" for k, v in OLD_ROWS.items()}
OLD_ROWS[3] = OLD_ROWS[2] + "; INSERT INTO incident_hosts VALUES (1, 'node-1'), (1, 'node-2')"


@pytest.mark.parametrize("old", range(VERSION))
def test_every_older_schema_opens_and_keeps_its_rows(tmp_path: Path, old: int) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, upto=old)
    shape = max((k for k in OLD_ROWS if k <= old), default=0)  # the newest row shape this schema takes
    if shape:
        conn.executescript(OLD_ROWS[shape])
    conn.close()
    with IncidentStore.open(path) as store:
        assert version_of(store.conn) == VERSION
        rows = store.query(limit=None)
        if old == 0:
            assert rows == []
            return
        (inc,) = rows
        assert inc.culprit_host == "node-2" and inc.cause_ids == ["nic-selection"]
        assert inc.uid == ("local-1" if shape == 1 else "u-1")
        # the later migrations index what the old row holds
        assert [i.id for i in store.query(node="node-1")] == [inc.id]
        assert [i.id for i in store.query(signature="abc123")] == [inc.id]
        assert [i.id for i in store.query(cause="nic-selection")] == [inc.id]


def test_migrations_are_numbered_by_position() -> None:
    assert VERSION == len(MIGRATIONS) >= 3


def test_a_store_from_a_newer_distdoctor_is_one_line(db: Path) -> None:
    IncidentStore.open(db).close()
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {VERSION + 1}")
    conn.close()
    with pytest.raises(HistoryError, match="newer distdoctor") as err:
        IncidentStore.open(db)
    assert "\n" not in str(err.value)


def test_the_store_is_wal_with_a_busy_timeout(db: Path) -> None:
    with IncidentStore.open(db) as store:
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 10_000


# --- recording ---------------------------------------------------------------------------------

def test_a_logs_diagnosis_is_recorded_with_culprit_causes_and_signature(db: Path) -> None:
    data = diagnosis("01-drill-crash")
    new_id = record_diagnosis(data, hosts={"0": "node-1", "1": "node-2"}, versions={"torch": "2.13.0"}, job="1234")
    with open_store(db) as store:
        inc = store.get(new_id)
    assert inc.culprit_ranks == ["1"] and inc.culprit_host == "node-2"
    assert inc.hosts == ["node-1", "node-2"] and inc.ranks == ["0", "1"]
    assert inc.cause_ids[0] == "rank-crash-deadlock" and 0 < inc.confidence <= 1
    assert inc.signature and "shard-<n>.bin" in inc.signature_text
    assert inc.versions == {"torch": "2.13.0"} and inc.job == "1234" and inc.outcome == "failed"


def test_secrets_are_redacted_before_they_are_stored(db: Path) -> None:
    data = diagnosis("incident-crash")
    data["first_failure"]["text"] = "RuntimeError: cannot fetch https://bot:hunter2hunter2@hub.example.com/x"
    data["verdict"]["summary"] = "token=ghp_abcdefghijklmnopqrstuvwxyz0123 leaked"
    new_id = record_diagnosis(data)
    with open_store(db) as store:
        store.resolve(new_id, "rotated HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz")
    raw = db.read_bytes() + (db.with_name(db.name + "-wal").read_bytes()
                             if db.with_name(db.name + "-wal").exists() else b"")
    for secret in (b"hunter2hunter2", b"ghp_abcdefghijklmnopqrstuvwxyz0123", b"hf_abcdefghijklmnopqrstuvwxyz"):
        assert secret not in raw


def test_one_incident_per_session_and_the_bisection_adds_its_switch(db: Path) -> None:
    first = record_event("inc-42", "logs", diagnosis("10-drill-wrong-nic"))
    again = record_event("inc-42", "conclusion", {"causes": [{"id": "nic-selection", "score": 3.0}],
                                                   "culprit": {"ranks": ["1"], "role": "crashed"}})
    fixed = record_event("inc-42", "bisect", {"verdict": {"switch": "if-eth0", "env": "NCCL_SOCKET_IFNAME=eth0",
                                                          "causes": ["nic-selection"]}})
    assert first == again == fixed
    with open_store(db) as store:
        (inc,) = store.query(session="inc-42")
    assert inc.fix_switch == "NCCL_SOCKET_IFNAME=eth0"
    assert inc.first_line and inc.signature  # kept from the logs step
    assert inc.source == "conclusion" and inc.cause_ids == ["nic-selection"]  # a bisection only adds


def test_a_repro_adds_to_the_jobs_diagnosis_and_never_replaces_it(db: Path) -> None:
    record_event("inc-43", "logs", diagnosis("01-drill-crash"))
    record_event("inc-43", "repro", {"outcome": "hang", "first_error": "RuntimeError: Timed out after 30 s",
                                     "causes": [{"id": "collective-timeout", "score": 1.0}]})
    with open_store(db) as store:
        (inc,) = store.query(session="inc-43")
    assert inc.source == "logs" and inc.cause_ids == ["rank-crash-deadlock"] and "shard" in inc.first_line
    # a repro alone is an incident of its own
    record_event("inc-44", "repro", {"outcome": "hang", "first_error": "RuntimeError: Timed out after 30 s",
                                     "causes": [{"id": "collective-timeout", "score": 1.0}]})
    with open_store(db) as store:
        (inc,) = store.query(session="inc-44")
    assert inc.source == "repro" and inc.cause_ids == ["collective-timeout"] and inc.outcome == "repro hang"


def test_events_that_conclude_nothing_are_not_recorded(db: Path) -> None:
    healthy = diagnosis("09-drill-spawn-in-torchrun")
    assert not healthy["verdict"]["failed"]
    assert record_event("s", "logs", healthy) is None
    assert record_event("s", "repro", {"outcome": "pass"}) is None
    assert record_event("s", "check", {"findings": []}) is None
    assert record_event("s", "bisect", {"verdict": None}) is None
    assert not db.exists() or open_store(db).count() == 0


def test_the_store_is_bounded(db: Path) -> None:
    with IncidentStore.open(db, limit=30) as store:
        for n in range(130):
            store.add(Incident(time=1_700_000_000 + n, uid=f"u{n}", culprit_host="node-1",
                               causes=[{"id": "nic-selection", "confidence": 1.0}]))
        store.prune()
        assert store.count() == 30
        assert min(i.time for i in store.query(limit=None)) == 1_700_000_100
        # the cause and host indexes lose the pruned rows too
        assert store.conn.execute("SELECT count(*) FROM incident_causes").fetchone()[0] == 30
        assert store.conn.execute("SELECT count(*) FROM incident_hosts").fetchone()[0] == 30


# --- export, import, sessions ------------------------------------------------------------------

def test_export_and_reimport_round_trip(db: Path, tmp_path: Path) -> None:
    for name, host in (("01-drill-crash", "node-1"), ("10-drill-wrong-nic", "node-2"), ("incident-hang", "node-3")):
        record_diagnosis(diagnosis(name), hosts={"1": host})
    with open_store(db) as store:
        store.resolve(2, "drained node-2: eth0 missing")
        exported = [i.to_export() for i in store.iter_all()]
    other = tmp_path / "other.db"
    with open_store(other) as store:
        assert store.import_incidents(Incident.from_export(json.loads(json.dumps(e))) for e in exported) == (3, 0)
        assert [i.to_export() for i in store.iter_all()] == exported
        assert store.import_incidents(Incident.from_export(e) for e in exported) == (0, 0)  # nothing twice


def test_an_import_brings_a_resolution_made_elsewhere(db: Path, tmp_path: Path) -> None:
    record_diagnosis(diagnosis("incident-crash"), hosts={"1": "node-5"})
    with open_store(db) as store:
        (line,) = [i.to_export() for i in store.iter_all()]
    line.update(resolution="bad shard removed", resolved_at=1_800_000_000.0)
    with open_store(db) as store:
        assert store.import_incidents([Incident.from_export(line)]) == (0, 1)
        assert store.get(1).resolution == "bad shard removed"


def test_session_files_are_imported_once(db: Path) -> None:
    from distdoctor.tui.record.session import SessionStore

    sessions = SessionStore()
    sessions.append("old-1", "logs", diagnosis("01-drill-crash"))
    sessions.append("old-2", "logs", diagnosis("09-drill-spawn-in-torchrun"))  # healthy: nothing
    sessions.append("old-3", "logs", diagnosis("incident-hang"))
    sessions.append("old-3", "bisect", {"verdict": {"switch": "shm", "env": "NCCL_SHM_DISABLE=1", "causes": []}})
    with open_store(db) as store:
        rows = store.query(limit=None)
        assert sorted(i.session for i in rows) == ["old-1", "old-3"]
        assert {i.session: i.fix_switch for i in rows}["old-3"] == "NCCL_SHM_DISABLE=1"
        assert all(i.uid.startswith(f"session-{i.session}-") for i in rows)
    sessions.append("old-4", "logs", diagnosis("incident-crash"))
    with open_store(db) as store:
        assert store.count() == 2  # once: a later session file arrives through the hook, not a re-import


# --- seen before, repeat offenders -------------------------------------------------------------

def test_seen_before_finds_the_same_signature_with_its_resolution(db: Path) -> None:
    old = record_diagnosis(diagnosis("01-drill-crash"), hosts={"1": "node-1"}, session_id="a")
    record_diagnosis(diagnosis("incident-crash"), hosts={"1": "node-1"}, session_id="b")
    with open_store(db) as store:
        store.resolve(old, "removed shard-00001.bin")
    now = diagnosis("01-drill-crash")
    found = recall(now, hosts={"1": "node-9"})["seen_before"]
    assert [f["id"] for f in found] == [old]
    assert found[0]["resolution"] == "removed shard-00001.bin"
    assert found[0]["why"].startswith("same failure signature")
    assert set(found[0]) >= {"id", "time", "resolution", "why"}
    # the session itself is not "before"
    assert recall(now, session_id="a")["seen_before"] == []


def test_seen_before_finds_the_same_host_only_for_a_hardware_or_network_cause(db: Path) -> None:
    nic = record_diagnosis(diagnosis("10-drill-wrong-nic"), hosts={"1": "node-7"})
    record_diagnosis(diagnosis("incident-crash"), hosts={"1": "node-7"})
    found = seen_before("ffffffffffff", "node-7", ["nic-selection"])
    assert [f["id"] for f in found] == [2, nic]  # both were on node-7 (newest first), the cause is the network
    assert "node-7" in found[0]["why"]
    assert seen_before("ffffffffffff", "node-7", ["rank-crash-deadlock"]) == []  # a bug in the job: not the host


def test_a_repeat_offender_gets_the_drain_command_printed(db: Path) -> None:
    for _ in range(3):
        record_diagnosis(diagnosis("10-drill-wrong-nic"), hosts={"1": "node-17"})
    record_diagnosis(diagnosis("10-drill-wrong-nic"), hosts={"1": "node-2"})
    (row,) = repeat_offenders(scheduler="slurm")
    assert row["host"] == "node-17" and row["incidents"] == 3
    assert row["commands"] == ["scontrol update nodename=node-17 state=drain "
                               "reason='distdoctor: culprit in 3 incidents in 30 days'"]
    assert recall(diagnosis("10-drill-wrong-nic"), hosts={"1": "node-17"})["repeat_offender"]["host"] == "node-17"
    assert repeat_offenders(days=30, now=10**10) == []  # a month later: forgiven


def test_drain_commands_for_each_scheduler() -> None:
    assert drain_commands("n1", 4, scheduler="kubernetes") == [
        "kubectl cordon n1", "kubectl drain n1 --ignore-daemonsets --delete-emptydir-data"]
    assert drain_commands("bad;host", 3, scheduler="slurm")[0].startswith("scontrol update nodename='bad;host' ")
    assert len(drain_commands("n1", 3, scheduler="none")) == 3  # cannot tell: both


# --- a store that cannot be used --------------------------------------------------------------

def test_a_corrupt_store_costs_one_line_and_returns_nothing(db: Path) -> None:
    db.write_bytes(b"this is not a database, it is a text file that got in the way\n" * 100)
    lines: list[str] = []
    assert record_diagnosis(diagnosis("01-drill-crash"), on_error=lines.append) is None
    assert seen_before("abc123abc123", "node-1", ["nic-selection"], on_error=lines.append) == []
    assert repeat_offenders(on_error=lines.append) == []
    assert len(lines) == 3 and all("\n" not in line and str(db) in line for line in lines)
    assert "not a database" in lines[0]


def _run(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distdoctor.tui.cli", *argv], capture_output=True, text=True,
                          env=env, timeout=120)


def test_a_corrupt_store_never_costs_the_commands_result(db: Path, tmp_path: Path) -> None:
    import os

    db.write_bytes(b"\x00garbage" * 1000)
    env = {**os.environ, "DISTDOCTOR_DB": str(db)}
    logs = _run("logs", str(RECORDED / "01-drill-crash" / "logs"), "--json", "--session", "s1", env=env)
    assert logs.returncode == 1  # the analysis's own code: a cause was found
    assert json.loads(logs.stdout)["verdict"]["failed"] is True
    assert logs.stderr.count("\n") == 1 and logs.stderr.startswith(f"distdoctor: incident history {db}: ")
    history = _run("history", env=env)
    assert history.returncode == 2
    assert history.stderr.count("\n") == 1 and "Traceback" not in history.stderr
    assert history.stderr.startswith("distdoctor: error: incident history ")


def test_a_locked_store_costs_one_line(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    IncidentStore.open(db).close()
    opener = IncidentStore.open
    monkeypatch.setattr(IncidentStore, "open", lambda path=None, **kw: opener(path, busy_timeout=0.2))
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another writer that holds on
    try:
        lines: list[str] = []
        assert record_diagnosis(diagnosis("01-drill-crash"), on_error=lines.append) is None
        assert len(lines) == 1 and "locked" in lines[0]
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_diagnosis_dict_from_the_engine_is_recorded(db: Path) -> None:
    """The shape of knowledge/diagnosis.py's Diagnosis.to_dict(): confidence in words, causes
    with scores, the culprit's ranks, ranks with their host; the first line given beside it."""
    data = {"confidence": "likely", "culprit": {"ranks": ["1"], "role": "crashed", "why": "rank 1 lost eth7"},
            "summary": "Rank 1 could not find its interface.", "cause": "nic-selection", "failed": True,
            "causes": [{"id": "nic-selection", "score": 3.0, "basis": "evidence"},
                       {"id": "rank-crash-deadlock", "score": 1.0, "basis": "evidence"}],
            "ranks": {"0": {"host": "node-8"}, "1": {"host": "node-9"}}, "seen_before": []}
    line = "[default1]:RuntimeError: [enforce fail at device.cc:84] ifa != nullptr. Unable to find address for: eth7"
    new_id = record_diagnosis(data, first_line=line)
    with open_store(db) as store:
        inc = store.get(new_id)
    assert (inc.culprit_host, inc.outcome, inc.cause_ids) == ("node-9", "likely", ["nic-selection", "rank-crash-deadlock"])
    assert inc.confidence == 0.75 and inc.signature
    assert recall(data, first_line=line)["seen_before"][0]["id"] == new_id


def test_the_apps_conclusion_is_recorded_through_the_session_writer(db: Path) -> None:
    from distdoctor.tui.record.session import SessionStore, SessionWriter

    errors: list[str] = []
    writer = SessionWriter(SessionStore(), errors.append)
    writer.append("app-1", "logs", diagnosis("10-drill-wrong-nic"))
    writer.append("app-1", "conclusion", {"causes": [{"id": "nic-selection", "score": 2.5, "basis": "evidence"}],
                                          "culprit": {"ranks": ["1"], "role": "crashed"}})
    assert writer.flush(timeout=30) and errors == []
    with open_store(db) as store:
        (inc,) = store.query(session="app-1")
    assert inc.source == "conclusion" and inc.cause_ids == ["nic-selection"] and inc.first_line


def test_recall_of_a_diagnosis_of_another_shape_is_empty(db: Path) -> None:
    lines: list[str] = []
    assert recall({"causes": "not a list"}, on_error=lines.append)["seen_before"] == []


def test_a_command_that_concludes_nothing_pays_nothing_for_the_history() -> None:
    code = ("import sys; from distdoctor.tui.record.history import record_event; "
            "assert record_event('s', 'topo', {'p2p': 'ok'}) is None; "
            "print(sorted(m for m in ('sqlite3', 'distdoctor.tui.record.redact', "
            "'distdoctor.tui.record.history.memory') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_what_fixed_it_comes_first_however_many_came_after(db: Path) -> None:
    data = diagnosis("incident-crash")
    fixed = record_diagnosis(data, now=1_700_000_000)
    with open_store(db) as store:
        store.resolve(fixed, "bad shard removed from the manifest")
    later = [record_diagnosis(data, now=1_700_000_100 + n) for n in range(12)]
    found = seen_before(recall(data)["signature"], limit=3)
    assert [f["id"] for f in found] == [fixed, later[-1], later[-2]]
    assert found[0]["resolution"] == "bad shard removed from the manifest"


CHECK = {"findings": [], "facts": {"versions": {
    "torch": {"present": True, "version": "2.13.0+cu124", "cuda": "12.4"},
    "nccl": {"loaded": "2.21.5", "versions": ["2.21.5"]}, "driver": {"source": "nvml", "version": "550.54.15"}}}}
VERSIONS = {"torch": "2.13.0+cu124", "cuda": "12.4", "nccl": "2.21.5", "driver": "550.54.15"}


@pytest.mark.parametrize("check_first", [True, False])
def test_the_sessions_check_gives_the_incident_its_versions(db: Path, check_first: bool) -> None:
    from distdoctor.tui.record.session import SessionStore

    sessions = SessionStore()
    steps = [("check", CHECK), ("logs", diagnosis("10-drill-wrong-nic"))]
    for kind, data in steps if check_first else reversed(steps):
        saved = sessions.append("v-1", kind, data)
        record_event("v-1", kind, data, record=saved)
    with open_store(db) as store:
        (inc,) = store.query(session="v-1")
    assert inc.versions == VERSIONS


def test_a_check_alone_is_no_incident(db: Path) -> None:
    assert record_event("v-2", "check", CHECK) is None
    with open_store(db) as store:
        assert store.count() == 0


def test_another_teams_session_of_the_same_name_stays_its_own_incident(db: Path) -> None:
    theirs = Incident(time=1_700_000_000, uid="session-inc-42-1690000000", session="inc-42", source="logs",
                      causes=[{"id": "ib-rdma-failure", "confidence": 1.0}], resolution="their fix")
    with open_store(db) as store:
        store.import_incidents([theirs])
    from distdoctor.tui.record.session import SessionStore

    data = diagnosis("01-drill-crash")
    saved = SessionStore().append("inc-42", "logs", data)
    record_event("inc-42", "logs", data, record=saved)
    with open_store(db) as store:
        rows = {i.uid: i for i in store.query(session="inc-42")}
    assert len(rows) == 2 and rows[theirs.uid].resolution == "their fix"
    assert rows[theirs.uid].cause_ids == ["ib-rdma-failure"]
