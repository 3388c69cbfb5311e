"""distdoctor.guard without a process group: cheap import, hardened_env lines, the rank-table
checks, and crash_guard's exit path in real subprocesses (no torch needed)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from distdoctor.guard import hardened_env
from distdoctor.guard.startup import problems

REPO = Path(__file__).resolve().parents[2]


def py(code: str, tmp_path: Path, **kw) -> subprocess.Popen[str]:
    script = tmp_path / "job.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("RANK", None)
    return subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, **kw)


def test_import_is_cheap() -> None:
    code = ("import sys, distdoctor.guard as g; g.crash_guard; g.hardened_env; g.PreflightError; "
            "print(sorted(m for m in ('torch', 'numpy', 'textual') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def _exported(lines: list[str]) -> dict[str, str]:
    """Run the lines in bash, as a job script would, and read back what they export."""
    script = "\n".join(lines) + "\nenv -0\n"
    out = subprocess.run(["bash", "-c", script], capture_output=True, timeout=30, check=True, env={})
    pairs = (item.split(b"=", 1) for item in out.stdout.split(b"\0") if b"=" in item)
    return {k.decode(): v.decode() for k, v in pairs}


def test_hardened_env_recent_nccl() -> None:
    env = _exported(hardened_env("nccl", "2.13.0+cu128"))
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "3"
    assert env["TORCH_FR_BUFFER_SIZE"] == "2000" and env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    assert env["TORCH_FR_DUMP_TEMP_FILE"].startswith("/tmp/")
    assert env["NCCL_DEBUG"] == "INFO" and env["TORCH_DISTRIBUTED_DEBUG"] == "DETAIL"
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in env and "GLOO_SOCKET_IFNAME" not in env
    assert any("TORCH_NCCL_BLOCKING_WAIT=1" in line for line in hardened_env("nccl", "2.13.0"))


def test_hardened_env_names_follow_the_torch_version() -> None:
    mid = _exported(hardened_env("nccl", "2.5.1"))
    assert mid["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000" and "TORCH_FR_BUFFER_SIZE" not in mid
    assert "TORCH_NCCL_DEBUG_INFO_TEMP_FILE" in mid
    old = _exported(hardened_env("nccl", "1.13.1"))
    assert old["NCCL_ASYNC_ERROR_HANDLING"] == "3" and not any(k.startswith("TORCH_NCCL") for k in old)


def test_hardened_env_gloo() -> None:
    lines = hardened_env("gloo", "2.13.0")
    env = _exported(lines)
    assert not any(k.startswith("NCCL_") or k.startswith("TORCH_NCCL") for k in env)
    assert any(line.startswith("# export GLOO_SOCKET_IFNAME=") for line in lines)


def _row(rank: int, local: int | None, host: str = "n0", device: str = "cpu", env_rank: str | None = None):
    return {"host": host, "rank": rank, "env_rank": env_rank if env_rank is not None else str(rank),
            "local_rank": None if local is None else str(local), "world_size": 2, "device": device,
            "pid": 100 + rank, "visible": None}


def test_problems_in_the_rank_table() -> None:
    assert problems([_row(0, 0), _row(1, 1)], 2) == []
    assert problems([_row(0, 0, "a"), _row(1, 0, "b")], 2) == []  # two nodes, local rank 0 each
    dup_local = problems([_row(0, 0), _row(1, 0)], 2)
    assert len(dup_local) == 1 and "LOCAL_RANK=0 is claimed by 2 processes" in dup_local[0]
    env = problems([_row(0, 0), _row(1, 1, env_rank="0")], 2)
    assert env == ["n0 pid 101: RANK=0 but the process group made it rank 1"]
    gpu = problems([_row(0, 0, device="cuda:1"), _row(1, 1, device="cuda:1")], 2)
    assert any("cuda:1 is used by 2 ranks" in p for p in gpu)
    assert any("LOCAL_RANK=0 but uses cuda:1" in p for p in gpu)


CRASH = """
import threading, time
from distdoctor.guard import crash_guard
threading.Thread(target=time.sleep, args=(600,)).start()   # non-daemon: would keep us alive
with crash_guard() as guard:
    for step in range(10):
        guard.step = step
        if step == 7:
            raise KeyError("labels")
"""


def test_crash_guard_logs_one_line_and_exits_despite_threads(tmp_path: Path) -> None:
    proc = py(CRASH, tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    line = next(x for x in err.splitlines() if "crashed" in x)
    assert line.startswith("[distdoctor.guard] rank ? crashed at step 7 (pid ")
    assert line.endswith("job.py:9 in <module>: KeyError: 'labels'")
    assert "process group: none" in err and "Python stacks follow" in err


DECORATED = """
import sys
from distdoctor.guard import crash_guard
@crash_guard(step=lambda: 42)
def train(fail):
    if fail:
        raise RuntimeError("boom\\nsecond line")
    print("trained")
train(False)
sys.stdout.flush()
train(True)
"""


def test_crash_guard_as_decorator(tmp_path: Path) -> None:
    proc = py(DECORATED, tmp_path)
    out, err = proc.communicate(timeout=60)
    assert out == "trained\n" and proc.returncode == 1
    assert "crashed at step 42" in err and "RuntimeError: boom | second line" in err


def test_clean_exit_passes_through(tmp_path: Path) -> None:
    proc = py("import sys\nfrom distdoctor.guard import crash_guard\nwith crash_guard():\n    sys.exit(0)\n",
              tmp_path)
    proc.communicate(timeout=60)
    assert proc.returncode == 0


@pytest.mark.skipif(not hasattr(signal, "SIGTERM"), reason="needs POSIX signals")
def test_sigterm_is_a_crash_with_context(tmp_path: Path) -> None:
    code = ("import time, sys\nfrom distdoctor.guard import crash_guard\nwith crash_guard(step=3):\n"
            "    print('ready', flush=True)\n    time.sleep(120)\n")
    proc = py(code, tmp_path)
    assert proc.stdout.readline() == "ready\n"  # printed inside crash_guard: its handler is set
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "crashed at step 3" in err and "killed by SIGTERM" in err
