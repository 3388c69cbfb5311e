"""Benchmark: `distdoctor fleet compare` over 10,000 snapshots (goal: under 2 s and 500 MB).

Run: python tests/bench/bench_fleet.py [--nodes N] [--hgx | --template SNAPSHOT.json] [--runs R]
The fleet is a real `distdoctor collect` output of this machine copied per node with its own
host and time, and a few planted outliers. --hgx takes the snapshot with the real probes but
the topology read from a recorded 8 x H100 NVML (a GPU node's size); --template copies a file.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
DISTDOCTOR = Path(sys.executable).parent / "distdoctor"
PLANTS = {17: {"driver": "535.104.05"}, 2500: {"nccl": "2.21.5"},
          5000: {"switches": {"NCCL_IB_DISABLE": "1"}}, 7500: {"shm_bytes": 64 << 20},
          9999: {"gpu_count": 7}}


def real_snapshot() -> dict:
    proc = subprocess.run([str(DISTDOCTOR), "collect"], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        sys.exit(f"distdoctor collect failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def hgx_snapshot() -> dict:
    from runnerkit import RecordedRunner
    from topology_fake_nvml import FakePynvml

    from distdoctor.probes.base import ProbeContext
    from distdoctor.probes.fleet import snapshot
    from distdoctor.probes.registry import PROBES
    from distdoctor.probes.topology import probe_topology

    nvml = FakePynvml.load("nvml-hgx-h100-8gpu-nvswitch.json")
    probes = dict(PROBES)
    probes["topology"] = lambda ctx: probe_topology(ProbeContext(runner=RecordedRunner({})),
                                                    nvml=nvml)
    return snapshot(ProbeContext(), probes=probes)


def run_compare(directory: Path) -> tuple[float, float, float, int, dict]:
    """Wall seconds, CPU seconds, peak RSS in MiB, exit code and JSON of one compare in a fresh
    process. CPU time is reported too: on a shared machine the wall time includes waiting."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen([str(DISTDOCTOR), "fleet", "compare", str(directory), "--json"],
                                stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        data = json.loads(out.read())
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode, data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--template", type=Path, help="a snapshot to copy instead of collecting one")
    parser.add_argument("--hgx", action="store_true", help="an 8 x H100 node's snapshot")
    args = parser.parse_args()
    sys.path[:0] = [str(HERE / d) for d in ("kits", "unit", "integration")]
    from fleet_gen import node_name, write_fleet

    if args.template:
        base = json.loads(args.template.read_text())
    else:
        base = hgx_snapshot() if args.hgx else real_snapshot()
    plants = {i: p for i, p in PLANTS.items() if i < args.nodes}
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        directory = Path(tmp)
        start = time.perf_counter()
        paths = write_fleet(directory, args.nodes, plants, base)
        size = sum(p.stat().st_size for p in paths)
        print(f"fleet: {args.nodes} snapshots, {size / args.nodes / 1024:.1f} KiB each, "
              f"{size / 2**20:.0f} MiB in all (written in {time.perf_counter() - start:.1f}s)")
        runs = [run_compare(directory) for _ in range(args.runs)]
        walls = [r[0] for r in runs]
        cpu = statistics.median(r[1] for r in runs)
        rss = max(r[2] for r in runs)
        code, data = runs[-1][3], runs[-1][4]
        found = {(o["node"], o["field"]) for o in data["outliers"]}
        want = {(node_name(i), "switch:" + next(iter(p["switches"])) if "switches" in p
                 else next(iter(p))) for i, p in plants.items()}
        print(f"compare: exit {code}, {data['nodes']} nodes, {len(data['outliers'])} outliers, "
              f"planted found exactly: {found == want}")
        wall = statistics.median(walls)
        print(f"wall time: median {wall:.2f}s of {args.runs} runs "
              f"({', '.join(f'{w:.2f}' for w in walls)}), goal 2.0s, ratio {wall / 2.0:.2f}")
        print(f"cpu time (user+sys): median {cpu:.2f}s; load average now "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(f"peak RSS: {rss:.0f} MiB, goal 500 MiB, ratio {rss / 500:.2f}")
    return 0 if found == want else 1


if __name__ == "__main__":
    sys.exit(main())
