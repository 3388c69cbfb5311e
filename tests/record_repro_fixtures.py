"""Re-record tests/fixtures/repro/: real two-rank Gloo repro runs (pass, crash, hang, bad NIC).

Run by hand with an interpreter that has torch: `python tests/record_repro_fixtures.py`.
Each case keeps the run's output.log (the run folder replaced by <run>) and a meta.json with
what distdoctor judged, so tests can replay the judging without launching anything.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from distdoctor.knowledge import load_knowledge
from distdoctor.probes.repro import ReproOptions, run_repro

HERE = Path(__file__).resolve().parent / "fixtures" / "repro"
CASES = {
    "pass": ({}, 60.0),
    "crash": ({"DISTDOCTOR_REPRO_CRASH_RANK": "1"}, 60.0),
    "hang": ({"DISTDOCTOR_REPRO_HANG_RANK": "1"}, 15.0),
    "gloo-bad-ifname": ({"GLOO_SOCKET_IFNAME": "distdoctor-missing0"}, 60.0),
}


def main() -> int:
    kb = load_knowledge()
    for name, (env, timeout) in CASES.items():
        with tempfile.TemporaryDirectory() as tmp:
            run_dir = Path(tmp) / "run"
            opts = ReproOptions(python=sys.executable, backend="gloo", timeout=timeout, env=env,
                                run_dir=run_dir)
            result = run_repro(opts, kb)
            text = Path(result.log).read_text(encoding="utf-8").replace(str(run_dir), "<run>")
        how = {"hang": "timeout", "stopped": "cancelled"}.get(result.outcome, "exited")
        meta = {"how": how, "launcher": result.exit_codes["launcher"], "nproc": result.nproc,
                "env": env, "timeout": timeout, "outcome": result.outcome,
                "progress": {str(k): v for k, v in result.progress.items()},
                "stuck_at": result.stuck_at, "first_error": result.first_error,
                "exit_codes": result.exit_codes,
                "recorded_with": "distdoctor repro --backend gloo, 2 ranks, CPU-only VM"}
        folder = HERE / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "output.log").write_text(text, encoding="utf-8")
        (folder / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        print(f"{name}: {result.outcome} in {result.duration_s:.1f}s, {len(text)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
