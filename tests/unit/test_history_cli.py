"""`distdoctor history` end to end (issue 27): 30 incidents recorded through `distdoctor logs
--session` from real recorded logs, across 6 hosts and 4 causes; then the ranking of culprit
hosts, the grouping by signature across ports, paths and ranks, "seen before" with the
earlier resolution for a new incident on the repeat host, export/import, help and errors."""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distdoctor.tui import cli

FIXTURES = Path(__file__).parents[1] / "fixtures"
SETS = {"crash": "recorded/01-drill-crash", "nan": "recorded/incident-crash", "nic": "recorded/10-drill-wrong-nic",
        "stall": "fresh/recorded/env-4ranks-barrier-stall", "straggler": "recorded/03-drill-straggler",
        "hang": "recorded/incident-hang", "port": "recorded/07-drill-port-in-use",
        "port2": "fresh/recorded/env-two-jobs-same-master-port"}
# (set, culprit host, variant): 24 incidents with a culprit host (node-3 the most often), and 6
# where the port was taken, which name no culprit. Variants of the crash: its shard under another
# folder and the crash on another rank.
PLAN = [("crash", "node-3", ""), ("crash", "node-3", "path"), ("nic", "node-3", ""), ("nic", "node-3", ""),
        ("nic", "node-3", ""), ("nan", "node-3", ""), ("stall", "node-3", ""), ("straggler", "node-3", ""),
        ("crash", "node-1", ""), ("crash", "node-1", "rank"), ("hang", "node-1", ""), ("nan", "node-1", ""),
        ("straggler", "node-1", ""),
        ("stall", "node-2", ""), ("stall", "node-2", ""), ("crash", "node-2", "path"), ("nan", "node-2", ""),
        ("nic", "node-4", ""), ("hang", "node-4", ""), ("crash", "node-4", "rank"),
        ("nan", "node-5", ""), ("straggler", "node-5", ""),
        ("hang", "node-6", ""), ("crash", "node-6", ""),
        ("port", "", ""), ("port", "", ""), ("port", "", ""), ("port2", "", ""), ("port2", "", ""), ("port2", "", "")]
HOSTS = [f"node-{n}" for n in range(1, 7)]


def distdoctor(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _copy(name: str, variant: str, to: Path) -> None:
    shutil.copytree(FIXTURES / SETS[name] / "logs", to)
    if variant == "path":  # the same corrupt shard, read from another folder
        for path in to.rglob("*.log"):
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace("shard-00001.bin", "/mnt/datasets/run-12/shard-00007.bin"), encoding="utf-8")
    if variant == "rank":  # the same crash on rank 3 of the job
        for folder in [p for p in to.rglob("1") if p.is_dir() and p.parent.name.startswith("attempt_")]:
            folder.rename(folder.with_name("3"))
        for path in to.rglob("*.log"):
            text = path.read_text(encoding="utf-8")
            # torchrun's summary gives the global rank beside the local one: both become 3
            text = re.sub(r"rank( *): 1 \(local_rank: 1\)", r"rank\1: 3 (local_rank: 1)", text)
            for old, new in (("[default1]", "[default3]"), ("[rank1]", "[rank3]"), ("local_rank: 1", "local_rank: 3")):
                text = text.replace(old, new)
            path.write_text(text, encoding="utf-8")


def _name_hosts(folder: Path, ranks: list[str], culprit: str | None, host: str) -> None:
    """NCCL's init lines (host:pid:tid ... rank R nranks N) so the logs name each rank's host:
    the culprit's on `host`, the others on the other hosts in turn."""
    others = [h for h in HOSTS if h != host]
    lines = []
    for i, rank in enumerate(ranks):
        on = host if rank == culprit else others[i % len(others)]
        lines.append(f"{on}:{4100 + i}:{4100 + i} [0] NCCL INFO comm 0x55d0{i} rank {rank} nranks {len(ranks)} "
                     f"cudaDev 0 busId 1000 - Init COMPLETE")
    (folder / "hosts.log").write_text("\n".join(lines) + "\n", encoding="utf-8")


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The 30 incidents, recorded once for the module: {"db", "runs": [{session, set, host, data}]}."""
    root = tmp_path_factory.mktemp("history")
    db = root / "incidents.db"
    with _environment(DISTDOCTOR_DB=str(db), XDG_STATE_HOME=str(root / "state"), DISTDOCTOR_LANG="en"):
        runs = []
        for n, (name, host, variant) in enumerate(PLAN):
            folder = root / f"inc-{n:02d}"
            _copy(name, variant, folder)
            code, out, _ = distdoctor("logs", str(folder), "--json")
            plain = json.loads(out)
            if host:
                culprit = (plain["verdict"].get("culprit") or {}).get("ranks") or []
                assert len(culprit) == 1, (name, culprit)
                _name_hosts(folder, sorted(plain["timeline"]), culprit[0], host)
            session = f"{name}{'-' + variant if variant else ''}-{n:02d}"
            code, out, err = distdoctor("logs", str(folder), "--json", "--session", session)
            assert code == 1 and err == "", (name, err)
            data = json.loads(out)
            # naming the hosts changed nothing in the diagnosis
            assert [c["id"] for c in data["causes"]][:2] == [c["id"] for c in plain["causes"]][:2]
            runs.append({"session": session, "set": name, "host": host, "variant": variant, "data": data})
        yield {"db": db, "runs": runs, "root": root}


@pytest.fixture
def store_env(recorded: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("DISTDOCTOR_DB", str(recorded["db"]))
    monkeypatch.setenv("XDG_STATE_HOME", str(recorded["root"] / "state"))
    return recorded


def _rows(*argv: str) -> list[dict[str, Any]]:
    code, out, err = distdoctor("history", *argv, "--json")
    assert err == "" and code in (0, 1)
    return json.loads(out)


def test_thirty_incidents_across_six_hosts_and_four_causes(store_env: dict[str, Any]) -> None:
    rows = _rows("--limit", "0")
    assert len(rows) == 30
    assert {r["culprit"]["host"] for r in rows} - {None} == set(HOSTS)
    top = Counter(r["causes"][0]["id"] for r in rows)
    assert len(top) >= 4, top
    for row in rows:
        assert set(row) >= {"id", "time", "session", "hosts", "culprit", "causes", "confidence", "signature",
                            "resolution"}


def test_nodes_ranks_the_host_that_failed_most_first(store_env: dict[str, Any]) -> None:
    code, out, _ = distdoctor("history", "--nodes", "--json")
    rows = json.loads(out)
    assert code == 1  # repeat offenders found
    assert [(r["host"], r["incidents"]) for r in rows[:2]] == [("node-3", 8), ("node-1", 5)]
    assert rows[0]["repeat_offender"] and rows[0]["commands"]
    assert {r["host"] for r in rows if not r["repeat_offender"]} == {"node-5", "node-6"}  # 2 each
    code, text, _ = distdoctor("history", "--nodes")
    assert text.splitlines()[1].split()[:2] == ["node-3", "8"]
    assert "repeat offender: node-3 was the culprit in 8 incidents in 30 days" in text


def test_signature_groups_one_failure_across_ports_paths_and_ranks(store_env: dict[str, Any]) -> None:
    by_session = {r["session"]: r for r in _rows("--limit", "0")}
    for family in (("crash",), ("port", "port2")):
        sessions = {r["session"] for r in store_env["runs"] if r["set"] in family}
        signatures = {by_session[s]["signature"] for s in sessions}
        assert len(signatures) == 1, (family, signatures)
        grouped = _rows("--signature", signatures.pop(), "--limit", "0")
        assert {r["session"] for r in grouped} == sessions
    # the crash's family holds a shard under another folder and the same crash on rank 3
    crash = [r for r in store_env["runs"] if r["set"] == "crash"]
    assert {r["variant"] for r in crash} == {"", "path", "rank"}
    assert {tuple(by_session[r["session"]]["culprit"]["ranks"]) for r in crash} == {("1",), ("3",)}
    # an incident's id stands for its signature
    one = by_session[crash[0]["session"]]
    assert {r["session"] for r in _rows("--signature", str(one["id"]), "--limit", "0")} == {r["session"] for r in crash}


def test_cause_and_node_filters(store_env: dict[str, Any]) -> None:
    nic = _rows("--cause", "nic-selection", "--limit", "0")
    assert nic and all("nic-selection" in [c["id"] for c in r["causes"]] for r in nic)
    assert {r["session"] for r in nic} >= {r["session"] for r in store_env["runs"] if r["set"] == "nic"}
    node5 = _rows("--node", "node-5", "--limit", "0")
    assert all("node-5" in r["hosts"] for r in node5)
    assert sum(r["culprit"]["host"] == "node-5" for r in node5) == 2


def test_a_new_incident_on_the_repeat_host_was_seen_before_with_its_resolution(
        store_env: dict[str, Any], tmp_path: Path) -> None:
    from distdoctor.tui.record.history import recall

    old = next(r for r in _rows("--node", "node-3", "--limit", "0") if r["causes"][0]["id"] == "nic-selection")
    code, out, _ = distdoctor("history", "resolve", str(old["id"]), "drained node-3: eth7 missing after a NIC swap")
    assert code == 0 and f"incident {old['id']} resolved" in out
    folder = tmp_path / "new"
    _copy("nic", "", folder)
    _name_hosts(folder, ["0", "1"], "1", "node-3")
    code, out, _ = distdoctor("logs", str(folder), "--json")
    data = json.loads(out)
    memory = recall(data)
    seen = memory["seen_before"]
    assert seen[0]["id"] == old["id"] and seen[0]["resolution"] == "drained node-3: eth7 missing after a NIC swap"
    assert memory["repeat_offender"]["host"] == "node-3"
    assert any("node-3" in c for c in memory["repeat_offender"]["commands"])
    # `logs` itself shows it: the verdict's seen_before and the repeat offender, in JSON and text
    assert data["verdict"]["seen_before"][0]["resolution"] == seen[0]["resolution"]
    assert data["verdict"]["repeat_offender"]["host"] == "node-3"
    code, out, _ = distdoctor("logs", str(folder))
    assert "Seen before:" in out and "drained node-3: eth7 missing after a NIC swap" in out
    assert "Repeat offender: node-3" in out


def test_table_output(store_env: dict[str, Any]) -> None:
    code, text, _ = distdoctor("history", "--limit", "5")
    lines = text.splitlines()
    assert code == 0 and lines[0].split()[:3] == ["ID", "TIME", "CULPRIT"]
    assert len([line for line in lines[1:] if re.match(r"\d+ +\d{4}-\d\d-\d\d ", line)]) == 5
    assert "5 incident(s) from" in text


def test_export_then_import_into_another_store_round_trips(store_env: dict[str, Any], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    first = tmp_path / "a.jsonl"
    assert distdoctor("history", "export", "-o", str(first))[0] == 0
    other = tmp_path / "other.db"
    # another team's machine: its own sessions, not these
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "elsewhere"))
    code, out, _ = distdoctor("history", "import", str(first), "--db", str(other))
    assert code == 0 and "30 incident(s) read: 30 added" in out
    code, again, _ = distdoctor("history", "export", "--db", str(other))
    assert again == first.read_text(encoding="utf-8")
    assert len(again.splitlines()) == 30
    code, out, _ = distdoctor("history", "import", str(first), "--db", str(other), "--json")
    assert json.loads(out) == {"read": 30, "added": 0, "updated": 0}


@pytest.mark.parametrize("argv, says", [
    (("resolve", "x", "text"), "resolve takes an incident id and a text"),
    (("resolve", "999999", "text"), "no incident 999999"),
    (("--signature", "zz"), "a signature is 4 to 12 hex digits"),
    (("import",), "import takes one or more JSON Lines files"),
    (("import", "/nonexistent/x.jsonl"), "cannot read /nonexistent/x.jsonl"),
    (("list", "extra"), "list takes no arguments"),
    (("--limit", "-1"), "--limit must be 0 or more"),
])
def test_bad_usage_is_one_line_and_exit_2(store_env: dict[str, Any], argv: tuple[str, ...], says: str) -> None:
    code, out, err = distdoctor("history", *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and says in err and "Traceback" not in err


def test_a_bad_import_line_is_named(store_env: dict[str, Any], tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "distdoctor-incident", "v": 1, "uid": "x", "time": 1}\n{"not": "one"}\n')
    code, _, err = distdoctor("history", "import", str(bad), "--db", str(tmp_path / "x.db"))
    assert code == 2 and f"{bad}:2: not a distdoctor incident" in err


def test_help_has_examples_and_the_store(store_env: dict[str, Any]) -> None:
    with pytest.raises(SystemExit):
        with contextlib.redirect_stdout(io.StringIO()) as out:
            cli.main(["history", "--help"])
    text = out.getvalue()
    assert "distdoctor history --nodes --days 30" in text and "incidents.db" in text and "exit codes:" in text


def test_help_in_chinese(store_env: dict[str, Any]) -> None:
    with pytest.raises(SystemExit):
        with contextlib.redirect_stdout(io.StringIO()) as out:
            cli.main(["--lang", "zh", "history", "--help"])
    assert "事件库" in out.getvalue()


def test_a_store_that_imports_the_same_sessions_meets_the_live_records(store_env: dict[str, Any],
                                                                      tmp_path: Path) -> None:
    """A store made later on this machine imports the session files; an export of the live
    store then adds nothing: each session's incident has one uid wherever it was recorded."""
    first = tmp_path / "a.jsonl"
    distdoctor("history", "export", "-o", str(first))
    other = tmp_path / "later.db"
    code, out, _ = distdoctor("history", "import", str(first), "--db", str(other), "--json")
    counts = json.loads(out)
    assert counts["added"] == 0 and counts["read"] == 30
