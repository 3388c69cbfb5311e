"""Benchmark `distdoctor lint` against `python -m py_compile` over the same Python files.

The corpus is real code already on this machine: torch/distributed and torch/utils/data of the
installed torch (the kind of code training scripts are made of), plus this repository's own
lint fixtures and any extra folders given. Both run as one subprocess over the whole list (each
pays its interpreter start once); best of --repeat runs; prints seconds per 10k lines and the ratio.

    python tests/bench/bench_lint.py
    python tests/bench/bench_lint.py --repeat 5 /path/to/more/scripts
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE.parent))
DISTDOCTOR = [sys.executable, "-c", "import sys; from distdoctor.tui.cli import main; sys.exit(main())"]


def corpus(extra: list[str]) -> list[Path]:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    roots = [Path(p) for p in extra] + [HERE / "fixtures" / "lint"]
    if spec and spec.origin:
        torch_dir = Path(spec.origin).parent
        roots += [torch_dir / "distributed", torch_dir / "utils" / "data"]
    files: list[Path] = []
    for root in roots:
        files += sorted(root.rglob("*.py")) if root.is_dir() else [root]
    return [f for f in files if f.is_file()]


def best(argv: list[str], repeat: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        res = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, check=False)
        times.append(time.perf_counter() - start)
        if res.returncode not in (0, 1, 2):
            raise SystemExit(f"{argv[:3]} failed: {res.stderr.decode()[-500:]}")
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", help="more files or folders to add to the corpus")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    files = corpus(args.paths)
    lines = sum(f.read_bytes().count(b"\n") for f in files)
    with tempfile.TemporaryDirectory() as cache:
        # py_compile writes .pyc files: send them to a throwaway prefix, not into site-packages
        env = dict(os.environ, PYTHONPYCACHEPREFIX=cache, PYTHONPATH=str(HERE.parent))
        t_lint = best([*DISTDOCTOR, "lint", "--json", *map(str, files)], args.repeat, env)
        t_compile = best([sys.executable, "-m", "py_compile", *map(str, files)], args.repeat, env)
    per = 10_000 / lines
    print(f"corpus: {len(files)} files, {lines} lines (torch.distributed, torch.utils.data, lint fixtures"
          f"{', extra' if args.paths else ''})")
    print(f"distdoctor lint:    {t_lint:.2f} s  = {t_lint * per:.3f} s per 10k lines")
    print(f"python -m py_compile: {t_compile:.2f} s  = {t_compile * per:.3f} s per 10k lines")
    print(f"ratio lint / py_compile: {t_lint / t_compile:.1f}x (best of {args.repeat}; both include one "
          f"interpreter start)")


if __name__ == "__main__":
    main()
