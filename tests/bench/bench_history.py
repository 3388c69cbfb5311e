"""Cost of the incident history: `python tests/bench/bench_history.py [N]` (N incidents, default 100,000).

1. Recording: what `logs --session` pays for the history, measured in a fresh interpreter that
   has imported what `logs` imports: the first record_event (the import of the store's modules,
   opening the store, the insert, its commit and the close), and a second one (the store's work
   alone), on an empty store and on one holding N incidents. Reference: the same command's own wall time
   (`distdoctor logs tests/fixtures/recorded/01-drill-crash/logs --session S --json`). Goal: under 20 ms.
2. Answering: `distdoctor history ...` on N incidents, wall time of the whole process; and what
   "seen before" costs a command that shows it (recall(), in-process, opening the store included).
   Reference: `distdoctor sessions --json` on an empty state folder, the cheapest listing command
   (the interpreter's start and the parser). Goal: under 0.5 s.
Modules run compiled (.pyc in a cache of the benchmark's own, whatever PYTHONDONTWRITEBYTECODE
says), as in an installed distdoctor. Prints the figures and the ratios; asserts nothing about time.
"""
from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "recorded" / "01-drill-crash" / "logs"
CAUSES = ["rank-crash-deadlock", "nic-selection", "collective-timeout", "master-addr-port", "ib-rdma-failure",
          "cuda-oom", "asymmetric-collective"]

RECORD = r"""
import json, sys, time
# what `logs --session` has imported by the time it records: the history's cost is what it adds
import distdoctor.tui.commands.logs, distdoctor.knowledge.logs, distdoctor.tui.record.session
data = json.load(open(sys.argv[1]))
from distdoctor.tui.record.history import record_event
t0 = time.perf_counter()
first = record_event(sys.argv[2], "logs", data, record={"created": time.time()})
t1 = time.perf_counter()
second = record_event(sys.argv[2] + "-again", "logs", data, record={"created": time.time()})
t2 = time.perf_counter()
assert first is not None and second is not None
print(json.dumps({"first_ms": (t1 - t0) * 1e3, "store_ms": (t2 - t1) * 1e3}))
"""


RECALL = r"""
import json, statistics, sys, time
from distdoctor.tui.record.history import open_store, recall, seen_before
data = json.load(open(sys.argv[1]))
store = open_store(sys.argv[2])
def timed(call):
    times = []
    for _ in range(20):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)
print(json.dumps({"recall": timed(lambda: recall(data, hosts={"1": "node-017"})),
                  "seen": timed(lambda: seen_before(f"{7:012x}", "node-017", ["nic-selection"], db=store))}))
"""


def run(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    took = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv}: exit {proc.returncode}: {proc.stderr.strip()}")
    return took


def best(argv: list[str], env: dict[str, str], n: int = 5) -> float:
    return min(run(argv, env) for _ in range(n))


def fill(db: Path, count: int) -> None:
    """`count` synthetic incidents over the last 90 days: 200 hosts, 7 causes, 500 signatures."""
    from distdoctor.tui.record.history.incident import Incident
    from distdoctor.tui.record.history.store import IncidentStore

    rng = random.Random(27)
    now = time.time()
    with IncidentStore.open(db, limit=max(count, 1)) as store, store._tx() as conn:
        for n in range(count):
            host = f"node-{rng.randrange(200):03d}"
            causes = rng.sample(CAUSES, 2)
            sig = f"{rng.randrange(500):012x}"
            store._insert(conn, Incident(
                time=now - rng.random() * 90 * 86400, uid=f"bench-{n}", session=f"s-{n}", source="logs",
                hosts=sorted({host, f"node-{rng.randrange(200):03d}"}), ranks=["0", "1", "2", "3"],
                culprit_ranks=[str(rng.randrange(4))], culprit_host=host, role="crashed", outcome="failed",
                causes=[{"id": causes[0], "confidence": 0.7}, {"id": causes[1], "confidence": 0.3}],
                confidence=0.7, summary=f"Rank 1 raised ValueError after step {n}: corrupted record in shard {n}",
                first_line=f"[rank1]: ValueError: Corrupted record in /data/shard-{n:05d}.bin at offset {n * 7}",
                signature=sig, signature_text="ValueError: Corrupted record in shard-<n>.bin at offset <n>",
                versions={"torch": "2.13.0", "nccl": "2.21.5"}))


def main(argv: list[str]) -> int:
    count = int(argv[0]) if argv else 100_000
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        tmp_path = Path(tmp)
        env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "DISTDOCTOR_LANG": "en",
               # compiled modules kept, as an installed distdoctor has them (in a cache of the
               # benchmark's own, so the working tree gets no __pycache__)
               "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        logs_json = tmp_path / "logs.json"
        proc = subprocess.run([sys.executable, "-m", "distdoctor.tui.cli", "logs", str(LOGS), "--json"],
                              env=env, capture_output=True, text=True)
        logs_json.write_text(proc.stdout)

        # 1. recording
        print("recording (a fresh interpreter each; median of 9):")
        for label, n in (("empty store", 0), (f"{count:,} incidents", count)):
            db = tmp_path / f"record-{n}.db"
            fill(db, n)
            subprocess.run([sys.executable, "-c", RECORD, str(logs_json), "warm"], check=True,
                           env={**env, "DISTDOCTOR_DB": str(db)}, capture_output=True)  # sessions imported
            rows = [json.loads(subprocess.run([sys.executable, "-c", RECORD, str(logs_json), f"s{i}"], check=True,
                                              env={**env, "DISTDOCTOR_DB": str(db)}, capture_output=True,
                                              text=True).stdout) for i in range(9)]
            first = statistics.median(r["first_ms"] for r in rows)
            again = statistics.median(r["store_ms"] for r in rows)
            print(f"  {label:<20} what a command pays {first:5.1f} ms (fastest {min(r['first_ms'] for r in rows):.1f};"
                  f" goal 20), of which the store's work {again:4.1f} ms (the modules' import is the rest)")
        command = [sys.executable, "-m", "distdoctor.tui.cli", "logs", str(LOGS), "--session", "bench", "--json"]
        cmd_s = statistics.median(run(command, {**env, "DISTDOCTOR_DB": str(tmp_path / "cmd.db")}) for _ in range(5))
        print(f"  reference: `logs --session` itself {cmd_s * 1e3:.0f} ms; recording is "
              f"{first / (cmd_s * 1e3):.1%} of it")

        # 2. answering on `count` incidents
        db = tmp_path / "big.db"
        start = time.perf_counter()
        fill(db, count)
        size = sum(p.stat().st_size for p in tmp_path.glob("big.db*")) / 2**20
        print(f"\n{count:,} incidents written in {time.perf_counter() - start:.1f} s; "
              f"{size:.1f} MiB on disk ({size * 2**20 / max(count, 1):.0f} bytes each)")
        big = {**env, "DISTDOCTOR_DB": str(db)}
        run([sys.executable, "-m", "distdoctor.tui.cli", "history"], big)  # sessions imported, caches warm
        recall_ms = json.loads(subprocess.run([sys.executable, "-c", RECALL, str(logs_json), str(db)], check=True,
                                              env=big, capture_output=True, text=True).stdout)
        print(f"seen before, in the command (in-process, median of 20): recall() {recall_ms['recall']:.1f} ms, "
              f"seen_before() with 50 matches {recall_ms['seen']:.1f} ms")
        ref = best([sys.executable, "-m", "distdoctor.tui.cli", "sessions", "--json"], env)
        print(f"reference: `distdoctor sessions --json` (empty) {ref * 1e3:.0f} ms\n")
        print(f"{'history ...':<40} {'ms':>6} {'ratio':>6}  (best of 5; goal 500 ms)")
        for args in (["history"], ["history", "--json"], ["history", "--nodes"], ["history", "--nodes", "--days", "90"],
                     ["history", "--node", "node-017"], ["history", "--cause", "ib-rdma-failure"],
                     ["history", "--signature", f"{7:012x}"], ["history", "--signature", f"{7:012x}", "--limit", "0"]):
            took = best([sys.executable, "-m", "distdoctor.tui.cli", *args], big)
            print(f"{' '.join(args):<40} {took * 1e3:6.0f} {took / ref:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
