"""Wall time of each drill against the bare run of the same job: `python tests/bench/bench_drill.py [NAME...]`.

Reference: the drill's own repro/cmd.sh run by hand with bash (torchrun on PATH from the target
interpreter's bin folder, or the shell launch), in a fresh copy of repro/, with no distdoctor
around it: the same script, launcher, fault and timeouts. The drill's time is the whole
`run_drill` call (writing the job, process-tree tracking, cleanup checks, label). Goal: 1.2x.
Runs take 5-30 s each (the hang drills wait out the job's 15 s process-group timeout).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from distdoctor.probes.drill import DRILLS, run_drill
from distdoctor.probes.repro.proctree import free_port


def bare(job: Path, python: str) -> float:
    """Run cmd.sh in a copy of the drill's repro/ folder; seconds until it returns."""
    with tempfile.TemporaryDirectory(prefix="drill-bare-") as tmp:
        work = Path(tmp) / "repro"
        shutil.copytree(job, work, ignore=shutil.ignore_patterns("ckpt"))
        env = {**os.environ, "MASTER_PORT": str(free_port()), "PYTHON": python,
               "PATH": f"{Path(python).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        start = time.monotonic()
        subprocess.run(["bash", "cmd.sh"], cwd=work, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=120, start_new_session=True)
        return time.monotonic() - start


def main(names: list[str]) -> int:
    python = sys.executable
    rows = []
    print(f"{'drill':<18} {'drill s':>8} {'bare s':>8} {'ratio':>6}  outcome")
    for name in names or list(DRILLS):
        with tempfile.TemporaryDirectory(prefix="drill-bench-") as tmp:
            start = time.monotonic()
            result = run_drill(name, run_dir=Path(tmp) / "run", python=python)
            took = time.monotonic() - start
            ref = bare(Path(tmp) / "run" / "repro", python)
        ratio = took / ref if ref else float("nan")
        rows.append(ratio)
        shown = "fault shown" if result.reproduced else "FAULT NOT SHOWN"
        print(f"{name:<18} {took:8.1f} {ref:8.1f} {ratio:6.2f}  {result.outcome}, {shown}", flush=True)
    if rows:
        rows.sort()
        print(f"median ratio drill/bare: {rows[len(rows) // 2]:.2f} (goal 1.2), worst {rows[-1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
