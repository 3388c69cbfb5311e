"""Session records: create, append, load("last"), list, summaries, locking, and `distdoctor sessions`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from distdoctor.tui.record.session import SessionError, SessionStore, summary, symptom_text

DISTDOCTOR = Path(sys.executable).with_name("distdoctor")


def run_cli(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    return subprocess.run([str(DISTDOCTOR), *args], capture_output=True, text=True, env=env,
                          timeout=60)


def test_append_load_roundtrip_and_last(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.create("a", host="node-1")
    store.create("b", host="node-2")
    store.append("a", "classify", {"symptom": "hang", "sub": "hang-init", "suspects": []})
    store.append("a", "check", {"findings": [], "facts": {}})
    record = store.load("a")
    assert [e["kind"] for e in record["events"]] == ["classify", "check"]
    assert record["events"][0]["data"]["sub"] == "hang-init"
    assert store.load("last")["id"] == "a"  # the most recently updated, not the newest created
    store.append("b", "logs", {"causes": []})
    assert store.load("last")["id"] == "b"


def test_update_sets_fields_and_keeps_events(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.append("u", "logs", {"causes": []})
    store.update("u", symptom="hang", answers={"launcher": "torchrun"}, events=[], id="other")
    record = store.load("u")
    assert record["symptom"] == "hang" and record["answers"] == {"launcher": "torchrun"}
    assert record["id"] == "u" and [e["kind"] for e in record["events"]] == ["logs"]


def test_append_creates_a_missing_session(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.append("fresh", "answer", {"question": "launcher?", "answer": "torchrun"})
    record = store.load("fresh")
    assert record["schema"] == 1 and record["host"] and len(record["events"]) == 1


def test_summaries_list_id_times_host_symptom_steps(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.create("s1", host="node-9")
    for kind in ("classify", "logs", "check", "check", "bisect"):
        store.append("s1", kind, {"symptom": "error", "sub": "error-watchdog"} if kind == "classify" else {})
    (row,) = store.summaries()
    assert row["id"] == "s1" and row["host"] == "node-9"
    assert row["symptom"] == "error: error-watchdog"
    assert row["steps"] == ["classify", "logs", "check", "bisect"] and row["events"] == 5
    assert row["created"] <= row["updated"]


def test_symptom_field_wins_over_classify_event() -> None:
    record = {"symptom": "hang", "events": [{"kind": "classify", "data": {"symptom": "error"}}]}
    assert symptom_text(record) == "hang"
    assert summary({"events": "garbage"})["steps"] == []  # defensive on a hand-edited file


def test_bad_missing_and_corrupt_sessions_are_one_line_errors(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    with pytest.raises(SessionError, match="no sessions yet"):
        store.load("last")
    with pytest.raises(SessionError, match="bad session id"):
        store.path("../etc/passwd")
    with pytest.raises(SessionError, match="no session 'nope'"):
        store.load("nope")
    store.create("good")
    (tmp_path / "torn.json").write_text('{"schema": 1, "id": "torn", "ev')
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SessionError, match="unreadable"):
        store.load("torn")
    assert [r["id"] for r in store.list()] == ["good"]


def test_pseudonym_mapping_is_not_a_session(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.create("s")
    mapping = store.pseudonyms_path("s")
    assert mapping == tmp_path / "s.pseudonyms.json"
    mapping.write_text(json.dumps({"schema": 1, "id": "s.pseudonyms", "host": {}}))
    assert [r["id"] for r in store.list()] == ["s"]
    with pytest.raises(SessionError):
        store.path("s.pseudonyms")


APPENDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from distdoctor.tui.record.session import SessionStore
    store = SessionStore(Path(sys.argv[1]))
    for i in range(int(sys.argv[3])):
        store.append("shared", "check", {"writer": sys.argv[2], "n": i})
""")


@pytest.mark.slow
def test_concurrent_appends_from_two_processes_lose_nothing(tmp_path: Path) -> None:
    """The app and a headless `--session` command may write one session at once."""
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, str(tmp_path), name, "40"])
             for name in ("a", "b")]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    events = SessionStore(tmp_path).load("shared")["events"]
    for name in ("a", "b"):
        assert [e["data"]["n"] for e in events if e["data"]["writer"] == name] == list(range(40))


def test_sessions_cli_text_and_json(tmp_path: Path) -> None:
    state = tmp_path / "state"
    empty = run_cli("sessions", state=state)
    assert empty.returncode == 0 and "no sessions yet" in empty.stdout
    store = SessionStore(state / "distdoctor" / "sessions")
    store.create("inc-1", host="node-3")
    store.append("inc-1", "classify", {"symptom": "hang", "sub": "hang-init"})
    store.append("inc-1", "check", {"findings": []})
    text = run_cli("sessions", state=state)
    assert text.returncode == 0, text.stderr
    line = next(ln for ln in text.stdout.splitlines() if ln.startswith("inc-1"))
    assert "node-3" in line and "hang: hang-init" in line and "classify, check" in line
    out = run_cli("sessions", "--json", state=state)
    data = json.loads(out.stdout)
    assert data["directory"] == str(state / "distdoctor" / "sessions")
    (row,) = data["sessions"]
    assert row["id"] == "inc-1" and row["steps"] == ["classify", "check"]
    assert row["created"].startswith("20")  # ISO time, readable in scripts and by people
    bad = run_cli("sessions", "--bogus", state=state)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_damaged_sessions_are_listed_and_skipped_not_fatal(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = SessionStore(state / "distdoctor" / "sessions")
    store.create("good", host="node-1")
    store.append("good", "logs", {"causes": []})
    d = store.directory
    # wrong types where numbers and lists belong: sorting and summaries once raised TypeError
    (d / "strtime.json").write_text(json.dumps({"schema": 1, "id": "strtime", "created": "x",
                                                "updated": "today", "events": "abc"}))
    (d / "intevents.json").write_text(json.dumps({"schema": 1, "id": 5, "updated": 1.0,
                                                  "events": 7}))
    (d / "torn.json").write_text('{"schema": 1, "id": "torn", "ev')
    (d / "empty.json").write_text("")
    (d / "list.json").write_text("[1, 2]")
    os.mkfifo(d / "pipe.json")  # would block a read
    rows = {r["id"]: r for r in store.summaries()}
    assert set(rows) == {"good", "strtime", "intevents"}  # the file name is the id
    assert rows["intevents"]["events"] == 0 and rows["strtime"]["steps"] == []
    skipped = dict(store.skipped)
    assert skipped.pop("torn.json").startswith("is unreadable: ")
    assert skipped == {"empty.json": "is empty", "list.json": "has an unknown format",
                       "pipe.json": "is unreadable: not a regular file"}
    with pytest.raises(SessionError, match="damaged"):
        store.append("intevents", "logs", {})  # never overwrite what a damaged file holds
    text = run_cli("sessions", state=state)
    assert text.returncode == 0 and "Traceback" not in text.stderr
    assert "skipped 4 unreadable file(s):" in text.stdout and "  torn.json: is unreadable" in text.stdout
    data = json.loads(run_cli("sessions", "--json", state=state).stdout)
    assert [r["id"] for r in data["sessions"]][0] == "good"
    assert {s["file"] for s in data["skipped"]} == {"torn.json", "empty.json", "list.json",
                                                   "pipe.json"}


def test_sessions_table_fits_80_columns(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = SessionStore(state / "distdoctor" / "sessions")
    store.create("20261130-101500-ab12", host="gpu-node-017.cluster.example.com")
    store.append("20261130-101500-ab12", "classify", {"symptom": "hang", "sub": "hang-mid-training"})
    for kind in ("logs", "check", "topo", "repro", "bisect", "fleet", "conclusion"):
        store.append("20261130-101500-ab12", kind, {})
    env = {**os.environ, "XDG_STATE_HOME": str(state), "COLUMNS": "80"}
    out = subprocess.run([str(DISTDOCTOR), "sessions"], capture_output=True, text=True, env=env,
                         timeout=60).stdout
    # every line but the one naming the folder (a path is never cut)
    assert all(len(line) <= 80 for line in out.splitlines() if str(state) not in line), out
    assert "steps classify, logs, check" in out and "(8 events)" in " ".join(out.split())
    assert "hang: hang-mid-training" in out


def test_check_appendable_fails_early_on_a_damaged_session(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.check_appendable("new-one")  # not there yet: append will create it
    store.create("ok")
    store.check_appendable("ok")
    (tmp_path / "bad.json").write_text(json.dumps({"schema": 1, "id": "bad", "events": None}))
    (tmp_path / "torn.json").write_text('{"schema": 1, "ev')
    for sid, word in (("bad", "damaged"), ("torn", "unreadable"), ("no way", "bad session id")):
        with pytest.raises(SessionError, match=word):
            store.check_appendable(sid)


def test_a_command_says_so_while_another_holds_the_session(tmp_path: Path) -> None:
    import select

    state = tmp_path / "state"
    store = SessionStore(state / "distdoctor" / "sessions")
    store.create("held")
    log = tmp_path / "rank0.log"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()",
         str(store.directory / ".held.lock")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        env = {**os.environ, "XDG_STATE_HOME": str(state)}
        cmd = subprocess.Popen([str(DISTDOCTOR), "logs", str(log), "--session", "held", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            ready, _, _ = select.select([cmd.stderr], [], [], 60)
            assert ready, "no word while waiting for the session"
            assert cmd.stderr.readline().startswith("distdoctor: waiting for session held: ")
            assert cmd.poll() is None  # still waiting, not failed
            holder.stdin.close()
            assert cmd.wait(timeout=60) == 1  # a cause was found
        finally:
            cmd.kill()
            cmd.communicate()
    finally:
        holder.kill()
        holder.wait()
    assert [e["kind"] for e in store.load("held")["events"]] == ["logs"]


def test_a_file_where_the_sessions_folder_belongs_is_named(tmp_path: Path) -> None:
    # `sessions` said "no sessions yet" and `--session` said "cannot lock ...: File exists"
    (tmp_path / "distdoctor").mkdir()
    (tmp_path / "distdoctor" / "sessions").write_text("not a folder")
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    log = tmp_path / "rank0.log"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    why = (f"{tmp_path / 'distdoctor' / 'sessions'} is not a folder: move it away, or set "
           "XDG_STATE_HOME to another place\n")
    out = subprocess.run([str(DISTDOCTOR), "sessions"], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 2 and out.stderr == f"distdoctor: error: {why}"
    # an analysis keeps its result and exit code; the session's problem is one line after it
    # (issue 16)
    out = subprocess.run([str(DISTDOCTOR), "logs", str(log), "--session", "s1"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 1 and "out of memory" in out.stdout.lower()
    assert out.stderr == f"distdoctor: the result was not saved to session s1: {why}"


def test_the_writer_reports_a_failure_and_keeps_writing(tmp_path: Path) -> None:
    from distdoctor.tui.record.session import SessionWriter

    errors: list[str] = []
    store = SessionStore(tmp_path)
    writer = SessionWriter(store, errors.append)
    writer.append("bad id!", "logs", {})  # refused by the store
    writer.append("w1", "logs", {"big": 1 << 80, "set": {1, 2}})  # odd values
    writer.append("w1", "check", {})
    assert writer.flush(timeout=30)
    assert len(errors) == 1 and "bad session id" in errors[0]
    assert [e["kind"] for e in store.load("w1")["events"]] == ["logs", "check"]
