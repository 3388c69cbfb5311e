"""`distdoctor lint` in a real subprocess: --json shape, text, exit codes 0/1/2, folders, sessions."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "lint"
DISTDOCTOR = [sys.executable, "-c", "import sys; from distdoctor.tui.cli import main; sys.exit(main())"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    res = subprocess.run([*DISTDOCTOR, "lint", *args], capture_output=True, text=True, timeout=120,
                         env=env, check=False)
    assert "Traceback" not in res.stderr, res.stderr
    return res


def test_json_shape_and_exit_1() -> None:
    res = run(str(FIXTURES / "dd701_fire.py"), "--json")
    assert res.returncode == 1, res.stderr
    data = json.loads(res.stdout)
    assert data["files"] == [str(FIXTURES / "dd701_fire.py")]
    (f,) = data["findings"]
    assert set(f) == {"file", "line", "col", "rule", "cause_id", "message", "fix"}
    assert (f["rule"], f["cause_id"], f["line"]) == ("DD701", "checkpoint-state-divergence", 13)
    assert "dist.barrier()" in f["fix"]


def test_clean_file_exit_0_and_text() -> None:
    res = run(str(FIXTURES / "dd701_ok.py"))
    assert res.returncode == 0 and res.stdout.startswith("clean: 1 file")


def test_text_names_place_rule_cause_and_fix() -> None:
    res = run(str(FIXTURES / "dd903_fire.py"))
    assert res.returncode == 1
    first = res.stdout.splitlines()[0]
    assert first.startswith(f"{FIXTURES / 'dd903_fire.py'}:17:5: DD903 [rank-crash-deadlock] ")
    assert "    from distdoctor.guard import crash_guard" in res.stdout


def test_folder_is_read_recursively(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "train.py").write_text((FIXTURES / "dd401_fire.py").read_text())
    (tmp_path / "pkg" / "ok.py").write_text((FIXTURES / "dd401_ok.py").read_text())
    (tmp_path / "pkg" / "notes.txt").write_text("not python")
    (tmp_path / "pkg" / ".venv").mkdir()
    (tmp_path / "pkg" / ".venv" / "skip.py").write_text((FIXTURES / "dd401_fire.py").read_text())
    data = json.loads(run(str(tmp_path / "pkg"), "--json").stdout)
    assert sorted(Path(f).name for f in data["files"]) == ["ok.py", "train.py"]
    assert [f["rule"] for f in data["findings"]] == ["DD401"]


def test_syntax_error_is_one_line_naming_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "broken.py"
    bad.write_text("import torch\n\ndef main(:\n    pass\n")
    res = run(str(bad))
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0
    assert f"{bad}:3: not valid Python" in res.stderr


def test_unreadable_inputs_exit_2(tmp_path: Path) -> None:
    res = run(str(tmp_path / "missing.py"))
    assert res.returncode == 2 and "missing.py: no such file or folder" in res.stderr
    binary = tmp_path / "model.py"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe")
    res = run(str(binary))
    assert res.returncode == 2 and "cannot lint (not UTF-8 text)" in res.stderr
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    res = run(str(fifo))
    assert res.returncode == 2 and "pipe.py: not a regular file" in res.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run(str(empty))
    assert res.returncode == 2 and "no *.py files" in res.stderr


def test_one_bad_file_still_lints_the_others(tmp_path: Path) -> None:
    bad = tmp_path / "broken.py"
    bad.write_text("def (\n")
    res = run(str(bad), str(FIXTURES / "dd401_fire.py"), "--json")
    assert res.returncode == 2
    assert [f["rule"] for f in json.loads(res.stdout)["findings"]] == ["DD401"]
    assert f"{bad}:1: not valid Python" in res.stderr


def test_session_records_the_findings() -> None:
    res = run(str(FIXTURES / "dd101_fire.py"), "--session", "lint-1", "--json")
    assert res.returncode == 1
    from distdoctor.tui.record.session import SessionStore

    (event,) = SessionStore().load("lint-1")["events"]
    assert event["kind"] == "lint"
    assert event["data"]["findings"][0]["rule"] == "DD101"
