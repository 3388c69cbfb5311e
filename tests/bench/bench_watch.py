"""Benchmark of `distdoctor run` on real 2-rank Gloo jobs under torchrun: the time from a hang's
onset to the verdict (goal: within the stall window plus 10 s) and the watcher's own CPU on a
healthy job (goal: under 2% of one core). Prints the figures and the ratio against each goal.

    python tests/bench/bench_watch.py [--runs 3] [--stall 10] [--healthy-s 60]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from distdoctor.probes.repro.proctree import free_port

JOB = r'''
import datetime, os, sys, time
import torch
import torch.distributed as dist

KIND, SECONDS = sys.argv[1], float(sys.argv[2])
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=600))
rank = dist.get_rank()
x = torch.randn(256, 256)
end = time.monotonic() + SECONDS
step = 0
while True:
    flag = torch.tensor([1.0 if time.monotonic() > end else 0.0])
    dist.broadcast(flag, src=0)
    if flag.item():
        break
    if KIND == "hang" and rank == 1 and step == 20:
        with open("onset", "w") as fh:
            fh.write(repr(time.time()))
        time.sleep(3600)
    for _ in range(10):
        x = torch.tanh(x @ x.T / 256)
    dist.all_reduce(x)
    step += 1
    if step % 20 == 0:
        print(f"rank {rank} step {step}", flush=True)
    time.sleep(0.02)
dist.destroy_process_group()
'''


def run(kind: str, stall: float, seconds: float) -> tuple[dict, dict, float, float | None]:
    with tempfile.TemporaryDirectory(prefix="bench-watch-") as tmp:
        folder = Path(tmp)
        (folder / "train.py").write_text(JOB)
        cmd = [sys.executable, "-m", "distdoctor.tui.cli", "run", "--stall", f"{stall:g}", "--json",
               "--evidence-dir", str(folder / "evidence"), "--", sys.executable, "-m", "torch.distributed.run",
               "--nproc-per-node=2", "--master-addr=127.0.0.1", f"--master-port={free_port()}",
               "train.py", kind, f"{seconds:g}"]
        env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=folder, env=env, timeout=900)
        done = time.time()
        out = json.loads(proc.stdout)
        watch = json.loads((folder / "evidence" / "watch.json").read_text())
        onset = float((folder / "onset").read_text()) if (folder / "onset").exists() else None
        return out, watch, done, onset


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--stall", type=float, default=10.0)
    parser.add_argument("--healthy-s", type=float, default=60.0)
    args = parser.parse_args()
    latencies = []
    for n in range(args.runs):
        out, watch, _, onset = run("hang", args.stall, 600)
        assert out["outcome"] == "hang" and out["verdict"]["culprit"]["ranks"] == ["1"], out
        latencies.append(out["hang"]["detected_after_s"])
        print(f"hang run {n + 1}: outcome {out['outcome']}, culprit rank 1, detected_after_s "
              f"{out['hang']['detected_after_s']} (stall {args.stall:g})")
    worst = max(latencies)
    goal = args.stall + 10
    print(f"detection: last progress -> verdict, worst {worst:.1f} s, median {sorted(latencies)[len(latencies) // 2]:.1f} s; "
          f"goal stall + 10 = {goal:g} s; ratio {worst / goal:.2f}")
    out, watch, _, _ = run("healthy", max(args.stall, 20.0), args.healthy_s)
    assert out["outcome"] == "finished", out
    share = 100.0 * watch["watcher_cpu_s"] / watch["watched_s"]
    print(f"watcher CPU on a healthy job ({watch['watched_s']:.0f} s, stall {max(args.stall, 20.0):g}): "
          f"{watch['watcher_cpu_s']:.2f} s = {share:.2f}% of one core; goal 2%; ratio {share / 2:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
