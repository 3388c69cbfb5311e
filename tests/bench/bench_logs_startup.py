"""Benchmark the common case of `distdoctor logs`: 2 ranks, about 50 KB of logs, where start-up is
nearly all of the time (issue 25 item 16: goal <= 3x `python -c pass`).

Runs `python -c pass` (the reference) and `distdoctor logs DIR` in the same run, best of --rounds,
each measured as CPU time (user + system, from wait4: what the load on a shared machine changes
least) and wall time, in three settings:

- bytecode: every module's .pyc cached (a normal install; PYTHONPYCACHEPREFIX to a warmed folder);
- no bytecode: this checkout's own modules compiled from source on every run, the standard library
  and the virtual environment's still cached (this machine's PYTHONDONTWRITEBYTECODE=1);
- bytecode, no start-up cache: DISTDOCTOR_NO_CACHE=1, so the knowledge base is parsed and checked
  and the scan plan built again (what the first run after a change of the knowledge files pays);
- bytecode, incident store: a state folder whose incident history holds one incident (a session
  recorded these logs), so the failure is looked up there ("seen before"); the other settings have
  no store and no session, so nothing is looked up.

    python tests/bench/bench_logs_startup.py [--rounds 7] [--profile] [--checkout DIR]

--checkout times another checkout of this repository (e.g. `git archive` of an older commit
unpacked in a folder) instead of this one, for before/after figures.

--profile also prints the slowest imports (python -X importtime) of one warm run.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
DISTDOCTOR = [sys.executable, "-c", "import sys; from distdoctor.tui.cli import main; sys.exit(main())"]
GOAL = 3.0


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run; its output is thrown away."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        raise SystemExit(f"{argv[-1][:40]} failed ({code}): {err[-1500:]}")
    if proc.stderr:
        proc.stderr.close()
    return usage.ru_utime + usage.ru_stime, wall


def _best(argv: list[str], env: dict[str, str], rounds: int) -> tuple[float, float]:
    runs = [_run(argv, env) for _ in range(rounds)]
    return min(c for c, _w in runs), min(w for _c, w in runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7, help="runs of each command; the best is reported")
    ap.add_argument("--profile", action="store_true", help="also print the slowest imports of a warm run")
    ap.add_argument("--checkout", default=REPO, help="the checkout to time (default: this one)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    checkout = os.path.realpath(args.checkout)
    if not os.path.isfile(os.path.join(checkout, "knowledge", "logs", "engine.py")):
        ap.error(f"--checkout {args.checkout}: not a checkout of this repository")
    import bench_logs

    work = tempfile.mkdtemp(prefix="dd-bench-startup-")
    try:
        logs = os.path.join(work, "logs")
        os.makedirs(logs)
        # the package is the checkout's root (package-dir mapping): a link named distdoctor on
        # PYTHONPATH is found before the editable install
        link = os.path.dirname(checkout)
        if os.path.basename(checkout) != "distdoctor":
            link = os.path.join(work, "path")
            os.makedirs(link)
            os.symlink(checkout, os.path.join(link, "distdoctor"))
        size = bench_logs.generate(logs, 50e3 / (1 << 30), 2, mix="realistic")
        warm, cold = os.path.join(work, "pyc-warm"), os.path.join(work, "pyc-cold")
        base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
        base["PYTHONPATH"] = os.pathsep.join([link, base.get("PYTHONPATH", "")])
        base["XDG_STATE_HOME"] = os.path.join(work, "state")
        base.pop("DISTDOCTOR_NO_CACHE", None)
        logs_argv = [*DISTDOCTOR, "logs", logs]
        ref_argv = [sys.executable, "-c", "pass"]
        # bytecode: one run of each fills the prefix folder (and the start-up cache)
        with_pyc = dict(base, PYTHONPYCACHEPREFIX=warm)
        _run(ref_argv, with_pyc)
        _run(logs_argv, with_pyc)
        # no bytecode for this checkout: the warmed folder less the checkout's own .pyc files
        shutil.copytree(warm, cold)
        for tree in {checkout, os.path.join(link, "distdoctor")}:
            shutil.rmtree(cold + tree, ignore_errors=True)
        without_pyc = dict(base, PYTHONPYCACHEPREFIX=cold, PYTHONDONTWRITEBYTECODE="1")
        no_cache = dict(with_pyc, DISTDOCTOR_NO_CACHE="1")
        with_store = dict(with_pyc, XDG_STATE_HOME=os.path.join(work, "state-store"))
        _run([*logs_argv, "--session", "bench"], with_store)  # the store, its incident and the start-up cache
        print(f"distdoctor logs ({checkout}) on 2 ranks, {size / 1e3:.0f} KB (realistic mix); best of {args.rounds}; "
              f"load now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        rows = []
        for label, env in (("bytecode", with_pyc), ("no bytecode (this checkout)", without_pyc),
                           ("bytecode, no start-up cache", no_cache), ("bytecode, incident store", with_store)):
            ref_cpu, ref_wall = _best(ref_argv, env, args.rounds)
            cpu, wall = _best(logs_argv, env, args.rounds)
            rows.append((label, cpu / ref_cpu))
            print(f"  {label:30} python -c pass cpu {ref_cpu * 1e3:5.0f} ms wall {ref_wall * 1e3:5.0f} ms | "
                  f"logs cpu {cpu * 1e3:5.0f} ms wall {wall * 1e3:5.0f} ms | {cpu / ref_cpu:5.2f}x cpu, "
                  f"{wall / ref_wall:5.2f}x wall")
        print(f"summary (goal of issue 25 item 16: <= {GOAL:.0f}x python -c pass):")
        for label, ratio in rows:
            print(f"  {label:30} {ratio:5.2f}x {'ok' if ratio <= GOAL else 'over'}")
        if args.profile:
            out = subprocess.run([sys.executable, "-X", "importtime", *logs_argv[1:]], env=with_pyc,
                                 capture_output=True, text=True, timeout=120).stderr
            rows2 = []
            for line in out.splitlines():
                parts = line.split("|")
                if line.startswith("import time:") and len(parts) == 3 and parts[0][12:].strip().isdigit():
                    rows2.append((int(parts[0][12:]), int(parts[1]), parts[2].strip()))
            print("slowest imports (self ms, cumulative ms):")
            for own, cum, name in sorted(rows2, reverse=True)[:20]:
                print(f"  {own / 1e3:6.1f} {cum / 1e3:6.1f}  {name}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
