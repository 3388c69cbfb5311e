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

from distdoctor.knowledge import load_knowledge
from distdoctor.probes import cuda_driver, registry
from distdoctor.probes.base import ProbeContext, ProbeResult
from distdoctor.tui.cli import main
from distdoctor.tui.commands import check_text
from distdoctor.tui.record.session import SessionStore

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
    assert finding["fix"].startswith("torchrun --nnodes=N --nproc-per-node=G train.py   # ")


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
    words = re.findall(r"^(FAIL|WARN|ERROR|UNAVAILABLE|OK) +\S", out, re.M)
    assert words[0] == "FAIL" and {"WARN", "OK"} <= set(words)
    assert words == sorted(words, key=["FAIL", "WARN", "ERROR", "UNAVAILABLE", "OK"].index)
    assert "cause: rank-env-mismatch" in out and "next: action [1] below" in out
    tail = out[out.index("Next actions (copy-paste):"):]
    assert ("# [1] FAIL rank-out-of-range (rank-env-mismatch)\n"
            "torchrun --nnodes=N --nproc-per-node=G train.py   # let one launcher") in tail


def test_text_reads_at_80_columns_and_never_splits_a_command(capsys, monkeypatch) -> None:
    """The old table cut `TORCH_NCCL_DUMP_ON_TIM EOUT` and squeezed every column to a few letters."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    rc, out, _ = check(capsys, "--only", "switches")
    assert rc == 0 and "\x1b[" not in out  # captured output is no terminal: no colour codes
    head, _, tail = out.partition("Next actions (copy-paste):\n")
    assert all(len(line) <= 80 for line in head.splitlines()), head
    assert re.search(r"^WARN +debug logging is on: NCCL_DEBUG=INFO$", head, re.M)
    assert "some ranks? " not in head and "\u2503" not in head  # blocks, not a box-drawn table
    commands = [line for line in tail.splitlines() if not line.startswith("# ")]
    kb = load_knowledge(use_env=False)
    assert kb.checks["no-explicit-timeouts"].fix in commands  # whole, though over 80 columns
    assert len(kb.checks["no-explicit-timeouts"].fix) > 80
    assert all(re.match(r"^# \[\d\] (FAIL|WARN) [a-z-]+", line) for line in tail.splitlines()
               if line.startswith("# "))


def test_piped_output_has_no_colour_codes(tmp_path: Path) -> None:
    """The real console script with stdout a pipe, as in `distdoctor check | tee log`."""
    exe = Path(sys.executable).with_name("distdoctor")
    env = {k: v for k, v in os.environ.items() if not k.startswith(JOB_PREFIXES)}
    env.update(NCCL_DEBUG="INFO", TERM="xterm-256color", HOME=str(tmp_path))
    env.pop("FORCE_COLOR", None)
    proc = subprocess.run([str(exe), "check", "--only", "switches"], capture_output=True,
                          text=True, timeout=60, env=env)
    assert proc.returncode == 0 and "WARN" in proc.stdout
    assert "\x1b" not in proc.stdout and proc.stderr == ""


@pytest.mark.parametrize("argv,message", [
    (["--only", "nosuch"], "distdoctor: error: --only: unknown probe 'nosuch' (choose from: versions, "),
    (["--python", "/no/such/python"], "distdoctor: error: --python /no/such/python: no such interpreter"),
    (["--python", "no-such-python-xyz"], "distdoctor: error: --python no-such-python-xyz: no such interpreter"),
    (["--deadline", "0"], "distdoctor: error: --deadline must be a positive number of seconds"),
    # nan once printed "timed out after nans"; inf made the sweep's queue wait raise OverflowError
    (["--deadline", "nan"], "distdoctor: error: --deadline must be a positive number of seconds"),
    (["--deadline", "inf"], "distdoctor: error: --deadline must be a positive number of seconds"),
    (["--pid", "0"], "distdoctor: error: --pid 0: not a process id"),
    (["--pid", "abc"], "distdoctor: error: argument --pid: invalid int value: 'abc'"),
    (["--bogus"], "distdoctor: error: unrecognized arguments: --bogus"),
    (["--only", "shm", "shm"], "distdoctor: error: --only: 'shm' is named more than once"),
    (["--only", "shm", "--only", "network", "shm"], "distdoctor: error: --only: 'shm' is named"),
    (["--python", "/"], "distdoctor: error: --python /: no such interpreter (/ is a directory)"),
    (["--json", "--python", "/"], "distdoctor: error: --python /: no such interpreter"),
])
def test_bad_usage_is_one_line_and_exit_2(capsys, argv: list[str], message: str) -> None:
    rc, out, err = check(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.startswith(message)
    assert err.count("\n") == 1


def test_python_that_is_not_executable(capsys, tmp_path: Path) -> None:
    script = tmp_path / "python"
    script.write_text("print(1)\n")
    rc, out, err = check(capsys, "--python", str(script), "--only", "versions")
    assert rc == 2 and out == ""
    assert err == f"distdoctor: error: --python {script}: no such interpreter ({script} is not executable)\n"


@pytest.mark.parametrize("body,why", [
    ("#!/bin/sh\nexec sleep 60\n", "timed out after 1.8s"),  # a wrapper that hangs: killed, then usage
    ("#!/bin/sh\necho hello\n", "exited 0: no output"),       # runs, but is no Python
])
def test_python_that_never_runs_python_is_usage_error(capsys, tmp_path: Path, body: str,
                                                       why: str) -> None:
    script = tmp_path / "python"
    script.write_text(body)
    script.chmod(0o755)
    rc, out, err = check(capsys, "--json", "--python", str(script), "--only", "versions",
                         "--deadline", "2")
    assert rc == 2 and out == ""
    assert err == (f"distdoctor: error: --python {script}: not a Python interpreter that answers "
                   f"({why})\n")


@pytest.mark.parametrize("name,problem", [("missing", "no such directory"),
                                          ("file.toml", "not a directory")])
def test_broken_knowledge_env_is_one_line_exit_2(capsys, monkeypatch, tmp_path: Path, name: str,
                                                 problem: str) -> None:
    (tmp_path / "file.toml").write_text("[meta]\n")
    value = str(tmp_path / name)
    monkeypatch.setenv("DISTDOCTOR_KNOWLEDGE", value)
    rc, out, err = check(capsys, "--json", "--only", "launch")
    assert rc == 2 and out == ""
    assert err == f"distdoctor: error: knowledge: {value}: {problem} (set by $DISTDOCTOR_KNOWLEDGE)\n"


def test_check_loads_neither_networkx_nor_pynvml_without_a_driver(tmp_path: Path) -> None:
    """The topology probe said "no driver" after ~0.3 s of imports (networkx for the verdict and
    for the knowledge tree check, pynvml); now the dynamic loader answers first."""
    if cuda_driver.nvml_library_missing() is False:
        pytest.skip("this host has the NVIDIA driver library: the probe rightly uses both")
    code = ("import sys\nfrom distdoctor.tui.cli import main\nrc = main(['check', '--json'])\n"
            "sys.stderr.write(repr(sorted(m for m in ('networkx', 'pynvml') if m in sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path)})
    data = json.loads(proc.stdout)
    assert proc.stderr == "[]"
    assert data["probes"]["topology"]["reason"].startswith("no NVIDIA driver (NVML Shared Library Not Found)")


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
    proc = subprocess.Popen([sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"],
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    # /proc/PID/environ holds the parent's environment until the child has exec'd: wait for it
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
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


def test_blocks_fit_any_width_and_keep_status_words() -> None:
    """Recorded findings of every status, rendered at 60 columns: words lead, ids stay whole."""
    fix = "export NCCL_SOCKET_IFNAME==ib0   # a command longer than the narrowest terminal, kept whole"
    findings = [
        {"probe": "p", "check": "ok-one", "status": "ok", "title": "fine", "detail": "",
         "cause_ids": [], "fix": ""},
        {"probe": "network", "check": "socket-ifname-matches-nothing", "status": "fail",
         "title": "NCCL_SOCKET_IFNAME=ib matches no interface on this node, so NCCL cannot start",
         "detail": "NCCL would fail in bootstrap: 'no socket interface found'.",
         "cause_ids": ["nic-selection", "rank-crash-deadlock"], "fix": fix},
        {"probe": "topology", "check": "topology-unavailable", "status": "unavailable",
         "title": "topology probe unavailable", "detail": "no NVIDIA driver", "cause_ids": [],
         "fix": ""},
        {"probe": "q", "check": "q-error", "status": "error", "title": "q probe error",
         "detail": "KeyError: 'x'", "cause_ids": [], "fix": ""},
    ]
    data = {"host": "node1", "duration_s": 0.12, "findings": findings}
    lines = [(word.ljust(check_text.LABEL) if word else " " * check_text.LABEL) + rest
             for word, _, rest in check_text.report_lines(data, 60)]
    assert all(len(line.rstrip()) <= 60 for line in lines)
    starts = [line.split()[0] for line in lines if line[:1].strip()]
    assert starts == ["FAIL", "ERROR", "UNAVAILABLE", "OK"]
    text = "\n".join(lines)
    assert "cause: nic-selection, rank-crash-deadlock" in text and "next: action [1] below" in text
    assert check_text.heading(data) == "distdoctor check on node1 (0.12 s): 1 fail, 1 error, 1 unavailable, 1 ok"
    assert [f["check"] for f in check_text.actions(findings)] == ["socket-ifname-matches-nothing"]
