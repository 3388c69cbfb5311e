"""`distdoctor bisect`: one switch at a time on real Gloo runs, plus the ordering and plan."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.probes.repro import ReproInputError, ReproOptions, find_switch, plan, run_bisect, trials
from distdoctor.tui.record.session import SessionStore

DISTDOCTOR = Path(sys.executable).with_name("distdoctor")
MISSING_NIC = "distdoctor-missing0"


@pytest.fixture(scope="module")
def kb():
    return load_knowledge(use_env=False)


@pytest.mark.slow
def test_missing_gloo_interface_is_bisected_to_nic_selection(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "output.log").write_text("an earlier run\n")
    proc = subprocess.run(
        [str(DISTDOCTOR), "bisect", "--python", sys.executable, "--backend", "gloo",
         "--timeout", "60", "--env", f"GLOO_SOCKET_IFNAME={MISSING_NIC}",
         "--run-dir", str(tmp_path / "runs"), "--json", "--session", "bisect-test"],
        capture_output=True, text=True, timeout=400)
    assert proc.returncode == 1, proc.stderr[-2000:]  # the baseline failed: a problem found
    assert f"--run-dir {tmp_path / 'runs'} is not empty" in proc.stderr  # said, not silent
    data = json.loads(proc.stdout)
    assert data["baseline"]["outcome"] == "error"
    assert data["baseline"]["env_added"]["GLOO_SOCKET_IFNAME"] == MISSING_NIC
    assert f"Unable to find address for: {MISSING_NIC}" in Path(data["baseline"]["log"]).read_text()
    assert data["passing_switch"] == data["verdict"]  # the old key stays beside the new one
    assert data["passing_switch"]["switch"] == "gloo-socket-ifname"
    assert data["passing_switch"]["cause"] == "nic-selection"
    assert "GLOO_SOCKET_IFNAME" in data["passing_switch"]["reminder"]
    assert data["passing_switch"]["permanent_fix"]
    last = data["runs"][-1]
    assert last["switch"] == "gloo-socket-ifname" and last["outcome"] == "pass"
    assert [r["outcome"] for r in data["runs"][:-1]] == ["error"] * (len(data["runs"]) - 1)
    # the winning run changed exactly one variable against the baseline (each run's Flight
    # Recorder dumps go into its own folder: that path is not a switch)
    result = json.loads((Path(last["log"]).parent / "result.json").read_text())
    per_run = {"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}
    changed = {k for k in result["env_added"] if k not in per_run
               and result["env_added"][k] != data["baseline"]["env_added"].get(k)}
    assert changed == {"GLOO_SOCKET_IFNAME"} and set(result["env_added"]) == set(data["baseline"]["env_added"])
    events = SessionStore().load("bisect-test")["events"]
    assert [e["kind"] for e in events] == ["bisect"] and events[0]["data"] == data


@pytest.mark.slow
def test_passing_baseline_stops_there_and_says_what_it_rules_out(tmp_path: Path, kb) -> None:
    seen: list[str] = []
    opts = ReproOptions(python=sys.executable, backend="gloo", timeout=60, run_dir=tmp_path)
    result = run_bisect(opts, kb, on_run=lambda label, r: seen.append(label))
    assert seen == ["baseline"]
    assert result.baseline_passed and result.found and result.passing_switch is None
    data = result.to_dict()
    assert data["runs"] == [] and "shm-insufficient" in data["rules_out"]


@pytest.mark.slow
def test_no_switch_helping_gives_no_verdict_and_unchanged_switches_are_skipped(tmp_path: Path, kb) -> None:
    opts = ReproOptions(python=sys.executable, backend="gloo", timeout=60, run_dir=tmp_path,
                        env={"DISTDOCTOR_REPRO_CRASH_RANK": "1", "GLOO_SOCKET_IFNAME": "lo"})
    result = run_bisect(opts, kb, ["GLOO_SOCKET_IFNAME=lo", f"GLOO_SOCKET_IFNAME={MISSING_NIC}"],
                        backend="gloo")
    assert [r.trial.label for r in result.runs] == [f"GLOO_SOCKET_IFNAME={MISSING_NIC}"]
    assert [r.result.outcome for r in result.runs] == ["error"]
    assert result.runs[0].result.env_added["DISTDOCTOR_REPRO_CRASH_RANK"] == "1"
    assert result.skipped == [{"switch": "gloo-socket-ifname", "env": "GLOO_SOCKET_IFNAME=lo",
                               "reason": "already set in the job's environment"}]
    assert result.passing_switch is None and not result.found


def test_trials_follow_the_knowledge_order_one_variable_each(kb) -> None:
    nccl = trials(kb, "nccl", interfaces=["eth0", "lo"])
    assert [t.label for t in nccl] == ["NCCL_IB_DISABLE=1", "NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1",
                                       "NCCL_SOCKET_IFNAME=eth0", "NCCL_SOCKET_IFNAME=lo"]
    assert [t.label for t in trials(kb, "gloo", interfaces=["ib0"])] == ["GLOO_SOCKET_IFNAME=ib0"]


def test_switch_names_resolve_by_id_or_variable(kb) -> None:
    assert find_switch(kb, "p2p-disable")[0].env == "NCCL_P2P_DISABLE"
    assert find_switch(kb, "NCCL_SOCKET_IFNAME=eth1") == (kb.switches["nccl-socket-ifname"], "eth1")
    with pytest.raises(ReproInputError, match="unknown switch"):
        find_switch(kb, "NCCL_MAGIC")
    with pytest.raises(ReproInputError, match="applies to the nccl backend"):
        trials(kb, "gloo", ["ib-disable"])


def test_plan_lists_baseline_then_each_switch(kb) -> None:
    lines = plan(ReproOptions(backend="gloo", env={"GLOO_SOCKET_IFNAME": "x"}), kb)
    assert lines[0].startswith("baseline:") and "GLOO_SOCKET_IFNAME=x" in lines[0]
    assert any("nic-selection" in line for line in lines[1:-1])
    assert not any("NCCL_IB_DISABLE" in line for line in lines)


def test_verdict_text_fits_80_columns_with_the_command_on_its_own_line(monkeypatch) -> None:
    from distdoctor.tui.commands.repro_view import render_bisect

    monkeypatch.setenv("COLUMNS", "80")
    long = "Binds Gloo (and PyTorch's CPU collectives) to one named interface. " * 3
    data = {"backend": "gloo", "baseline": {"outcome": "error", "duration_s": 4.9, "log": "/x"},
            "runs": [{"env": "GLOO_SOCKET_IFNAME=eth0", "outcome": "pass", "duration_s": 5.5}],
            "verdict": {"env": "GLOO_SOCKET_IFNAME=eth0", "cause": "nic-selection",
                        "cause_title": "NCCL or Gloo picked the wrong network interface",
                        "why": long, "permanent_fix": long, "reminder": long},
            "baseline_passed": False, "run_dir": "/tmp/runs"}
    lines = render_bisect(data, None).splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    i = lines.index("  to confirm in the job meanwhile:")
    assert lines[i + 1] == "    export GLOO_SOCKET_IFNAME=eth0"
    why = next(i for i, line in enumerate(lines) if line.startswith("  why: Binds Gloo"))
    assert lines[why + 1].startswith("       Gloo")  # wrapped under its label
