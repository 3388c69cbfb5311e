"""`distdoctor drill`: the catalogue, bad usage, and three drills run for real (torch on Gloo)."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

from distdoctor.probes.drill import DRILLS, DrillError, run_drill, store
from distdoctor.probes.drill.script import cmd_sh, fault_shown
from distdoctor.probes.drill.template import blocks, render
from distdoctor.probes.repro.proctree import port_is_free
from distdoctor.tui.cli import main


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "distdoctor.tui.cli", *argv], capture_output=True,
                          text=True, timeout=150)


def _left_behind(folder: Path) -> list[int]:
    """Processes of the job found independently of the runner: by working directory or argv."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "cwd"]):
        try:
            cwd = proc.info.get("cwd") or ""
            argv = " ".join(proc.info.get("cmdline") or [])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if cwd.startswith(str(folder)) or str(folder) in argv:
            found.append(proc.info["pid"])
    return found


def test_every_drill_renders_a_job_that_compiles_and_differs_from_the_healthy_one():
    healthy = render({})
    compile(healthy, "train.py", "exec")
    for drill in DRILLS.values():
        assert set(drill.blocks) <= set(blocks()), drill.name
        text = render(drill.blocks)
        compile(text, f"{drill.name}/train.py", "exec")
        assert ">>>" not in text and "<<<" not in text
        # the fault lives in the code, the environment, the launch or the port: never nowhere
        assert text != healthy or drill.env or drill.hold_port or drill.extra_world, drill.name
    with pytest.raises(KeyError):
        render({"no-such-block": "x = 1\n"})


def test_cmd_sh_shows_how_the_fault_is_launched():
    assert "WORLD_SIZE=3" in cmd_sh(DRILLS["world-size"], 2)
    assert "GLOO_SOCKET_IFNAME=ib0" in cmd_sh(DRILLS["wrong-nic"], 2)
    assert "http.server" in cmd_sh(DRILLS["port-in-use"], 2)
    assert "--log-dir ../logs/torchrun --redirects 3 --tee 3" in cmd_sh(DRILLS["crash"], 2)


def test_same_data_proof_needs_identical_ids_on_every_rank():
    same = "[rank0] epoch 0: first sample ids [1, 2]\n[rank1] epoch 0: first sample ids [1, 2]\n"
    differ = "[rank0] epoch 0: first sample ids [1, 2]\n[rank1] epoch 0: first sample ids [3, 4]\n"
    assert fault_shown(DRILLS["same-data"], same, "pass")
    assert not fault_shown(DRILLS["same-data"], differ, "pass")
    assert not fault_shown(DRILLS["same-data"], same, "error")


def test_list_text_json_and_passed_store(capsys):
    assert main(["drill", "list"]) == 0
    out = capsys.readouterr().out
    for name in DRILLS:
        assert name in out
    store.save_attempt("crash", 80, True, session="s1")
    store.save_attempt("straggler", 10, False)
    assert main(["drill", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["drills"]}
    assert set(rows) == set(DRILLS)
    assert rows["crash"]["passed"] and rows["crash"]["score"] == 80
    assert not rows["straggler"]["passed"]
    assert rows["crash"]["cause"] == "rank-crash-deadlock"


@pytest.mark.parametrize("argv, needle", [
    (["drill", "run", "no-such"], "unknown drill 'no-such'"),
    (["drill", "run", "crash", "--nproc", "9"], "--nproc must be 2, 3 or 4"),
    (["drill", "run", "crash", "--timeout", "500"], "--timeout must be between"),
    (["drill"], "say `list` or `run NAME`"),
])
def test_bad_usage_is_one_line_and_exit_2(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_record_refuses_a_folder_with_files(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("mine")
    assert main(["drill", "run", "crash", "--record", str(tmp_path)]) == 2
    assert "not an empty folder" in capsys.readouterr().err
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_python_that_cannot_run_the_job_is_usage_error(tmp_path):
    with pytest.raises(DrillError, match="could not start|not an executable"):
        run_drill("crash", python="/bin/false", run_dir=tmp_path / "r")


@pytest.mark.slow
def test_crash_for_real_through_the_cli(tmp_path):
    pytest.importorskip("torch")
    rec = tmp_path / "crash"
    proc = _cli("drill", "run", "crash", "--record", str(rec), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["drill"] == "crash" and data["outcome"] == "error" and data["reproduced"]
    assert data["expected"] == {"cause": "rank-crash-deadlock", "rank": "1"}
    assert data["cleanup"] == {"survivors": [], "port_free": True}
    assert port_is_free(data["port"]) and not _left_behind(rec)
    label = json.loads((rec / "label.json").read_text())
    assert label["primary"] == "rank-crash-deadlock" and label["culprit_rank"] == "1"
    rank_logs = sorted(p.relative_to(rec / "logs").parts[-2:] for p in (rec / "logs").rglob("*.log"))
    assert ("1", "stderr.log") in rank_logs and ("0", "stdout.log") in rank_logs
    stderr1 = next((rec / "logs").rglob("1/stderr.log")).read_text()
    assert "ValueError: Corrupted record in shard-00001.bin" in stderr1
    assert (rec / "repro" / "train.py").is_file() and (rec / "repro" / "cmd.sh").is_file()
    for path in rec.rglob("*"):  # a recording carries no path of this machine
        if path.is_file():
            assert str(tmp_path) not in path.read_text(errors="replace"), path


@pytest.mark.slow
def test_port_in_use_for_real_frees_the_port(tmp_path):
    pytest.importorskip("torch")
    result = run_drill("port-in-use", run_dir=tmp_path / "p")
    assert result.outcome == "error" and result.reproduced, (tmp_path / "p/logs/console.log").read_text()
    assert "EADDRINUSE" in (tmp_path / "p/logs/console.log").read_text()
    assert result.clean and port_is_free(result.port) and not _left_behind(tmp_path / "p")


@pytest.mark.slow
def test_straggler_for_real_times_out_and_leaves_nothing(tmp_path):
    pytest.importorskip("torch")
    result = run_drill("straggler", nproc=2, run_dir=tmp_path / "s")
    text = (tmp_path / "s/logs/console.log").read_text()
    assert result.outcome == "error" and result.reproduced, text
    assert "Timed out waiting 15000ms" in text
    assert result.clean and port_is_free(result.port) and not _left_behind(tmp_path / "s")


@pytest.mark.slow
def test_stopping_a_drill_mid_run_kills_its_tree(tmp_path):
    pytest.importorskip("torch")
    cancel = threading.Event()

    def on_line(line: str) -> None:
        if "rank=0" in line:  # the job is up: stop it, as Ctrl-C would
            cancel.set()

    result = run_drill("rank0-eval", run_dir=tmp_path / "c", on_line=on_line, cancel=cancel)
    assert result.outcome == "stopped" and not result.reproduced
    assert result.clean and port_is_free(result.port) and not _left_behind(tmp_path / "c")
