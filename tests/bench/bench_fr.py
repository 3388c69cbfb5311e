"""Benchmark: `distdoctor fr` against torch's fr_trace on the same Flight Recorder dumps.

Reference: `python -m torch.distributed.flight_recorder.fr_trace DIR --allow-incomplete-ranks`
(torch of the test extra). Both read the same pickles: the recorded Gloo cases rewritten in the
layout fr_trace reads (tests/fixtures/fr/frtrace_layout.py; fr_trace fails on the raw ones), and a
large set built from a recorded entry: 8 ranks x 2000 collectives (TORCH_FR_BUFFER_SIZE's
default), rank 5 stopping one collective early. Goal: distdoctor <= 0.5x fr_trace's time.

    python tests/bench/bench_fr.py [--runs N]
"""
from __future__ import annotations

import argparse
import copy
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FR = Path(__file__).resolve().parents[1] / "fixtures" / "fr"
sys.path.insert(0, str(FR))
from frtrace_layout import to_layout  # noqa: E402

CASES = ["healthy", "asymmetric", "extra_collective", "crash", "size", "dtype", "never_reaches"]
DISTDOCTOR = [sys.executable, "-c", "import sys; from distdoctor.tui.cli import main; sys.exit(main())"]
FR_TRACE = [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace"]


def big_set(folder: Path, ranks: int = 8, n: int = 2000, late: int = 5) -> None:
    """`ranks` dumps of `n` all_reduces each; rank `late` never issues the last one."""
    base = pickle.loads((folder.parent / "healthy" / "trace_rank_0").read_bytes())
    template = base["entries"][0]
    folder.mkdir()
    for r in range(ranks):
        doc = copy.deepcopy(base)
        doc["pg_config"]["0"]["ranks"] = str(list(range(ranks)))
        count = n - 1 if r == late else n
        doc["entries"] = [dict(template, collective_seq_id=i + 1, record_id=i, op_id=i + 1,
                               retired=i < n - 1) for i in range(count)]
        doc["pg_status"] = {"0": {"last_completed_collective": n - 1, "last_enqueued_collective": count,
                                  "last_started_collective": -1}}
        (folder / f"trace_rank_{r}").write_bytes(pickle.dumps(doc))


def timed(argv: list[str], runs: int) -> tuple[float, int]:
    times, code = [], 0
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    for _ in range(runs):
        start = time.perf_counter()
        res = subprocess.run(argv, capture_output=True, timeout=600, env=env, check=False)
        times.append(time.perf_counter() - start)
        code = res.returncode
    return statistics.median(times), code


def in_process(folder: Path, runs: int) -> tuple[float, float]:
    """Analysis alone, imports excluded: fr_trace's read_dir + build_db vs read_and_analyse."""
    import logging

    from torch.distributed.flight_recorder.components.builder import build_db
    from torch.distributed.flight_recorder.components.config_manager import JobConfig
    from torch.distributed.flight_recorder.components.loader import read_dir

    from distdoctor.probes.flightrec import read_and_analyse

    logging.getLogger("Flight Recorder").setLevel(logging.ERROR)
    ours, theirs = [], []
    for _ in range(runs):
        start = time.perf_counter()
        read_and_analyse([str(folder)])
        ours.append(time.perf_counter() - start)
        args = JobConfig().parse_args([str(folder), "--allow-incomplete-ranks"])
        start = time.perf_counter()
        details, version = read_dir(args)
        build_db(details, args, version)
        theirs.append(time.perf_counter() - start)
    return statistics.median(ours), statistics.median(theirs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp)
        for case in CASES:
            to_layout(FR / case / "json", top / case)
        big_set(top / "big_8x2000")
        print(f"{'dumps':<18} {'distdoctor fr':>14} {'fr_trace':>10} {'ratio':>7}   (median of {runs}, "
              f"whole process)")
        ratios = []
        for name in CASES + ["big_8x2000"]:
            ours, _ = timed([*DISTDOCTOR, "fr", str(top / name), "--json"], runs)
            theirs, _ = timed([*FR_TRACE, str(top / name), "--allow-incomplete-ranks"], runs)
            ratios.append(ours / theirs)
            print(f"{name:<18} {ours:>13.3f}s {theirs:>9.3f}s {ours / theirs:>6.2f}x")
        print(f"{'geometric mean':<18} {'':>14} {'':>10} {statistics.geometric_mean(ratios):>6.2f}x   "
              f"goal <= 0.5x")
        ours, theirs = in_process(top / "big_8x2000", runs)
        print(f"analysis only (imports excluded), big_8x2000: distdoctor {ours:.3f}s, "
              f"fr_trace read_dir+build_db {theirs:.3f}s, ratio {ours / theirs:.2f}x")


if __name__ == "__main__":
    main()
