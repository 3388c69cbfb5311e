"""The real subprocess runner and the concurrent probe sweep: nothing hangs, reasons are kept."""
from __future__ import annotations

import sys
import threading
from pathlib import Path

import psutil
from runnerkit import RecordedRunner

from distdoctor.probes.base import OK, UNAVAILABLE, ProbeContext, ProbeResult
from distdoctor.probes.runner import SubprocessRunner
from distdoctor.probes.sweep import run_sweep, select


def test_runner_returns_output_and_code() -> None:
    result = SubprocessRunner()([sys.executable, "-c", "import sys; print('hi'); sys.exit(3)"], timeout=30)
    assert result.stdout.strip() == "hi" and result.returncode == 3 and not result.error


def test_runner_missing_command_is_a_reason_not_a_crash() -> None:
    result = SubprocessRunner()(["/nonexistent/nvidia-smi", "topo", "-m"], timeout=5)
    assert result.returncode is None and "not found" in result.error


def test_runner_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    # The parent spawns a grandchild that would outlive a plain kill of the parent.
    code = (f"import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', "
            f"'import time; time.sleep(600)']); open({str(pidfile)!r}, 'w').write(str(p.pid)); "
            f"time.sleep(600)")
    result = SubprocessRunner()([sys.executable, "-c", code], timeout=2)
    assert "timed out" in result.error
    grandchild = int(pidfile.read_text())
    try:
        proc = psutil.Process(grandchild)
        proc.wait(timeout=10)  # reaped by init once killed
    except psutil.NoSuchProcess:
        pass
    assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE


def test_recorded_runner_answers_and_records_calls() -> None:
    runner = RecordedRunner({("nvidia-smi", "-L"): "GPU 0: NVIDIA H200\n"})
    assert runner(["nvidia-smi", "-L"], timeout=1).stdout.startswith("GPU 0")
    assert "not found" in runner(["ibstat"], timeout=1).error
    assert runner.calls == [("nvidia-smi", "-L"), ("ibstat",)]


def test_sweep_deadline_isolates_a_hung_probe() -> None:
    release = threading.Event()
    seen: list[str] = []

    def hung(ctx: ProbeContext) -> ProbeResult:
        release.wait(60)
        return ProbeResult("hung", OK, {})

    def fine(ctx: ProbeContext) -> ProbeResult:
        return ProbeResult("fine", OK, {"answer": 42})

    def broken(ctx: ProbeContext) -> ProbeResult:
        raise RuntimeError("bad parse")

    try:
        results = run_sweep(ProbeContext(runner=RecordedRunner({})),
                            {"hung": hung, "fine": fine, "broken": broken}, deadline=0.5,
                            on_result=lambda r: seen.append(r.name))
    finally:
        release.set()
    assert results["fine"].facts["answer"] == 42
    assert results["hung"].status == UNAVAILABLE and "timed out" in results["hung"].reason
    assert results["broken"].status == "error" and "bad parse" in results["broken"].reason
    assert sorted(seen) == ["broken", "fine", "hung"]
    assert list(results) == ["hung", "fine", "broken"]


def test_select_names_unknown_probe() -> None:
    registry = {"a": lambda ctx: ProbeResult("a", OK, {})}
    assert list(select(registry, None)) == ["a"]
    try:
        select(registry, ["a", "zzz"])
    except KeyError as exc:
        assert exc.args[0] == "zzz"
    else:
        raise AssertionError("unknown probe accepted")


def test_context_reads_under_root(tmp_path: Path) -> None:
    (tmp_path / "proc" / "driver" / "nvidia").mkdir(parents=True)
    (tmp_path / "proc/driver/nvidia/version").write_text("NVRM version: 550.54.15\n")
    ctx = ProbeContext(root=tmp_path)
    assert "550.54.15" in (ctx.read_text("/proc/driver/nvidia/version") or "")
    assert ctx.read_text("/etc/nccl.conf") is None
