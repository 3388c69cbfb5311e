"""`distdoctor check`: JSON shape, exit codes, usage errors, --pid/--python/--session, a hung probe."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

from distdoctor.probes import registry
from distdoctor.probes.base import ProbeContext, ProbeResult
from distdoctor.tui.cli import main
from distdoctor.tui.session import SessionStore

JOB_PREFIXES = ("NCCL_", "TORCH_", "GLOO_", "SLURM_", "OMPI_", "PMI_", "MASTER_", "TORCHELASTIC_")
JOB_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
             "CUDA_VISIBLE_DEVICES", "KUBERNETES_SERVICE_HOST")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No job variables from the developer's shell, and a home without ~/.nccl.conf."""
    for name in list(os.environ):
        if name.startswith(JOB_PREFIXES) or name in JOB_NAMES:
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        rc = main(["check", *argv])
    except SystemExit as exc:  # argparse's own errors
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def by_check(data: dict) -> dict[str, dict]:
    return {f["check"]: f for f in data["findings"]}


def test_json_shape_and_exit_1_on_a_failed_check(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "4")
    rc, out, _ = check(capsys, "--json", "--only", "launch", "switches", "shm")
    data = json.loads(out)
    assert rc == 1
    assert set(data) >= {"host", "duration_s", "findings", "facts"}
    assert list(data["facts"]) == ["launch", "switches", "shm"]
    assert data["facts"]["launch"]["rank"] == 5
    finding = by_check(data)["rank-out-of-range"]
    assert finding == {"probe": "launch", "check": "rank-out-of-range", "status": "fail",
                       "title": "RANK=5 is outside 0..WORLD_SIZE-1 (WORLD_SIZE=4)",
                       "detail": finding["detail"], "cause_ids": ["rank-env-mismatch"],
                       "fix": finding["fix"]}
    assert finding["fix"].startswith("let one launcher set the ranks: torchrun")


def test_warnings_alone_exit_0(capsys) -> None:
    rc, out, _ = check(capsys, "--json", "--only", "launch", "switches")
    data = json.loads(out)
    assert rc == 0
    assert {f["status"] for f in data["findings"]} == {"ok", "warn"}


def test_text_output_groups_by_status_with_words(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("COLUMNS", "160")
    rc, out, _ = check(capsys, "--only", "launch", "switches")
    assert rc == 1
    cells = [m.group(1) for m in re.finditer(r"^\S (FAIL|WARN|ERROR|UNAVAILABLE|OK) ", out, re.M)]
    assert cells[0] == "FAIL" and {"WARN", "OK"} <= set(cells)
    assert cells == sorted(cells, key=["FAIL", "WARN", "ERROR", "UNAVAILABLE", "OK"].index)
    assert "rank-env-mismatch" in out
    tail = out[out.index("Next actions (copy-paste):"):]
    assert "# rank-out-of-range\nlet one launcher set the ranks: torchrun --nnodes=N" in tail


@pytest.mark.parametrize("argv,message", [
    (["--only", "nosuch"], "distdoctor: error: --only: unknown probe 'nosuch' (choose from: versions, "),
    (["--python", "/no/such/python"], "distdoctor: error: --python /no/such/python: no such interpreter"),
    (["--python", "no-such-python-xyz"], "distdoctor: error: --python no-such-python-xyz: no such interpreter"),
    (["--deadline", "0"], "distdoctor: error: --deadline must be a positive number of seconds"),
    (["--pid", "0"], "distdoctor: error: --pid 0: not a process id"),
    (["--pid", "abc"], "distdoctor check: error: argument --pid: invalid int value: 'abc'"),
    (["--bogus"], "distdoctor: error: unrecognized arguments: --bogus"),
])
def test_bad_usage_is_one_line_and_exit_2(capsys, argv: list[str], message: str) -> None:
    rc, out, err = check(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.startswith(message)
    assert err.count("\n") == 1


def test_unreadable_pid_is_exit_2(capsys) -> None:
    pid = max(psutil.pids()) + 100000
    while psutil.pid_exists(pid):
        pid += 1
    rc, _, err = check(capsys, "--pid", str(pid))
    assert rc == 2
    assert err == f"distdoctor: error: --pid {pid}: no process {pid} (no /proc/{pid}/environ)\n"


def test_pid_judges_the_running_process_environment(capsys) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "RANK": "7", "WORLD_SIZE": "4",
           "NCCL_IB_DISABLE": "1"}
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], env=env,
                            stdin=subprocess.PIPE)
    try:
        rc, out, err = check(capsys, "--json", "--pid", str(proc.pid), "--only", "launch", "switches")
    finally:
        proc.communicate(b"", timeout=30)
    if rc == 2 and "permission denied" in err:
        pytest.skip(err.strip())
    data = json.loads(out)
    assert rc == 1
    assert data["facts"]["launch"]["source"] == f"/proc/{proc.pid}/environ"
    assert by_check(data)["rank-out-of-range"]["status"] == "fail"
    assert by_check(data)["debug-switch-left-on"]["status"] == "warn"


def test_second_interpreter_without_torch(capsys) -> None:
    other = "/usr/bin/python3"
    if not os.path.isfile(other) or subprocess.run(
            [other, "-c", "import torch"], capture_output=True, timeout=60).returncode == 0:
        pytest.skip("no interpreter without torch at /usr/bin/python3")
    rc, out, _ = check(capsys, "--json", "--python", other, "--only", "versions")
    data = json.loads(out)
    assert rc == 0
    assert data["facts"]["versions"]["torch_present"] is False
    assert by_check(data)["torch-not-installed"]["status"] == "warn"
    assert by_check(data)["torch-not-installed"]["fix"].startswith("distdoctor check --python ")


def test_session_records_the_json(capsys) -> None:
    rc, out, _ = check(capsys, "--json", "--only", "launch", "--session", "incident-1")
    record = SessionStore().load("incident-1")
    assert rc == 0
    assert record["events"][-1]["kind"] == "check"
    assert record["events"][-1]["data"]["facts"] == json.loads(out)["facts"]


def test_a_hung_probe_cannot_stall_the_others(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()

    def hung(ctx: ProbeContext) -> ProbeResult:
        release.wait(120)  # a wedged nvidia-smi or resolver
        return ProbeResult("hung", "ok", {})

    monkeypatch.setitem(registry.PROBES, "hung", hung)
    try:
        rc, out, _ = check(capsys, "--json", "--only", "hung", "launch", "--deadline", "0.5")
    finally:
        release.set()
    data = json.loads(out)
    assert rc == 0
    assert data["probes"]["hung"] == {"status": "unavailable", "reason": "timed out after 0.5s",
                                      "duration_s": 0.0}
    assert by_check(data)["hung-unavailable"]["detail"] == "timed out after 0.5s"
    assert data["probes"]["launch"]["status"] == "ok"
