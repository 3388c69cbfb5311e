"""Benchmark: `distdoctor check --json` against `python -m torch.utils.collect_env`, alternately.

Run: .venv/bin/python tests/bench/bench_check.py [--runs 5]
Prints each tool's median wall time, the ratio (goal: at most 0.3), and how much each reports.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed(argv: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"{argv[0]} failed with {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return elapsed, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs of each tool (default 5)")
    args = parser.parse_args()
    script = Path(sys.executable).with_name("distdoctor")
    check = [str(script)] if script.exists() else [sys.executable, "-m", "distdoctor.tui.cli"]
    check += ["check", "--json"]
    collect = [sys.executable, "-m", "torch.utils.collect_env"]
    times: dict[str, list[float]] = {"check": [], "collect_env": []}
    outputs: dict[str, str] = {}
    timed(check)  # warm the page cache for both before measuring
    timed(collect)
    for _ in range(args.runs):
        for name, argv in (("check", check), ("collect_env", collect)):
            elapsed, outputs[name] = timed(argv)
            times[name].append(elapsed)
    med = {name: statistics.median(values) for name, values in times.items()}
    data = json.loads(outputs["check"])
    facts = sum(len(v) for v in data["facts"].values())
    lines = [line for line in outputs["collect_env"].splitlines() if ":" in line]
    print(f"runs: {args.runs} each, alternating, python {sys.version.split()[0]}")
    for name in times:
        print(f"{name:12s} median {med[name]:.3f} s  (runs: "
              + ", ".join(f"{t:.3f}" for t in times[name]) + ")")
    print(f"ratio check/collect_env: {med['check'] / med['collect_env']:.2f}  (goal <= 0.30)")
    print(f"check reports {len(data['findings'])} findings and {facts} top-level facts over "
          f"{len(data['facts'])} probes; collect_env prints {len(lines)} 'key: value' lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
