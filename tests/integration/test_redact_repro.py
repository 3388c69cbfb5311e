"""Secrets given with `repro --env` never land in clear: not in runs/*/result.json, not in the
session, not on the terminal; run folders are 0700 and their files 0600 (a real Gloo run)."""
from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.probes.repro import ReproOptions, manual_commands, plan
from distdoctor.probes.repro.run import new_run_dir, runs_root
from distdoctor.tui.record.session import SessionStore

DISTDOCTOR = Path(sys.executable).with_name("distdoctor")
TOKEN = "hf_abcdefghijklmnopqrstuvwxyz123456"
PASSWORD = "plainDbPassw0rd42"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.slow
def test_env_secrets_are_masked_in_records_and_echo(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    out = subprocess.run([str(DISTDOCTOR), "repro", "--backend", "gloo", "--python", sys.executable,
                          "--timeout", "120", "--env", f"HF_TOKEN={TOKEN}",
                          "--env", f"DB_PASSWORD={PASSWORD}", "--env", "NCCL_IB_DISABLE=1",
                          "--session", "inc-1"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    runs = sorted((state / "distdoctor" / "runs").iterdir())
    assert len(runs) == 1
    run = runs[0]
    stored = [run / "result.json", run / "output.log", run / "distdoctor_repro.py",
              state / "distdoctor" / "sessions" / "inc-1.json"]
    for text in [out.stdout, out.stderr] + [p.read_text() for p in stored]:
        assert TOKEN not in text and PASSWORD not in text
    result = json.loads((run / "result.json").read_text())
    assert result["env_added"]["HF_TOKEN"] == "[redacted]"
    assert result["env_added"]["DB_PASSWORD"] == "[redacted]"
    assert result["env_added"]["NCCL_IB_DISABLE"] == "1"  # diagnostic values stay
    # the commands printed to paste take the secret from the shell, never from the screen
    assert 'HF_TOKEN="$HF_TOKEN"' in out.stdout and "NCCL_IB_DISABLE=1" in out.stdout
    # private: the runs folder, the run's folder and every file in it
    assert mode(state / "distdoctor" / "runs") == 0o700 and mode(run) == 0o700
    for path in run.rglob("*"):  # the Flight Recorder folder is private too
        assert mode(path) == (0o700 if path.is_dir() else 0o600), path
    assert SessionStore(state / "distdoctor" / "sessions").load("inc-1")["events"]


def test_bisect_plan_and_manual_commands_mask_secrets(tmp_path: Path) -> None:
    kb = load_knowledge(use_env=False)
    opts = ReproOptions(python=sys.executable, backend="gloo", env={"HF_TOKEN": TOKEN,
                                                                    "GLOO_SOCKET_IFNAME": "lo"})
    lines = "\n".join(plan(opts, kb, "gloo"))
    assert TOKEN not in lines and "HF_TOKEN=[redacted]" in lines and "GLOO_SOCKET_IFNAME=lo" in lines
    manual = manual_commands(opts, tmp_path / "s.py", master_addr="10.0.0.1")
    assert TOKEN not in manual and 'HF_TOKEN="$HF_TOKEN"' in manual


def test_bisect_command_echo_takes_secrets_from_the_shell() -> None:
    from distdoctor.tui.commands.repro import _bisect_command

    args = argparse.Namespace(python=None, nproc=2, backend="gloo", timeout=60.0, session=None,
                              env=[f"HF_TOKEN={TOKEN}", "NCCL_DEBUG=WARN"])
    line = _bisect_command(args)
    assert TOKEN not in line
    assert line == 'distdoctor bisect --backend gloo --env NCCL_DEBUG=WARN --env "HF_TOKEN=$HF_TOKEN"'
    done = subprocess.run(["bash", "-c", f"printf '%s\\n' {line.removeprefix('distdoctor bisect ')}"],
                          capture_output=True, text=True, env={"HF_TOKEN": "from-the-shell"},
                          timeout=30)
    assert "HF_TOKEN=from-the-shell" in done.stdout.splitlines()


def test_runs_root_is_made_private_even_if_it_was_not(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    runs_root().mkdir(parents=True)
    runs_root().chmod(0o755)  # as an older distdoctor left it
    new_run_dir()
    assert mode(runs_root()) == 0o700
