"""Bench: each hostile input class of issue 11 through the real CLI, its wall time and peak RSS
printed against the goal (under 10 s, bounded memory). Run: python tests/bench/bench_bounded.py"""
from __future__ import annotations

import bz2
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / d) for d in ("kits", "unit", "integration")]

from fleet_gen import base_snapshot  # noqa: E402
from test_bounded_inputs import NCCL_LINE, OOM, OVERLAYS, bomb, run, xml_devices  # noqa: E402

GOAL_S = 10.0


def cases(tmp: Path) -> list[tuple[str, list[str], bytes | None]]:
    bomb(tmp / "bomb.gz", 2000, gzip)  # 2 GiB of lines in ~2 MB
    bomb(tmp / "bomb.bz2", 2000, bz2)
    raw = b"".join(b"[rank0]: step %d loss 0.%d\n" % (i, i) for i in range(400_000)) + OOM
    packed = gzip.compress(raw)
    (tmp / "cut.gz").write_bytes(packed[: len(packed) // 2])
    loop = tmp / "loop" / "a"
    loop.mkdir(parents=True)
    (loop / "rank1.log").write_bytes(OOM)
    os.symlink("..", loop / "up")
    os.symlink(".", tmp / "loop" / "self")
    (tmp / "many.xml").write_text(xml_devices(300_000))  # ~30 MB
    (tmp / "deep.xml").write_text('<system><cpu numaid="0">' + '<pci busid="0000:01:00.0">' * 1_000_000)
    with open(tmp / "huge.log", "wb") as fh:
        chunk = NCCL_LINE * ((1 << 20) // len(NCCL_LINE))
        for _ in range(40):
            fh.write(chunk)
    fleet = tmp / "fleet"
    fleet.mkdir()
    good = json.dumps(base_snapshot(), separators=(",", ":"))
    for i in range(3):
        (fleet / f"ok{i}.json").write_text(good.replace('"host":"', f'"host":"ok{i}-', 1))
    (fleet / "deep.json").write_text(good.replace('"switches":{', '"switches":{"X":' + "[" * 200_000
                                                  + "]" * 200_000 + ",", 1))
    (fleet / "huge.json").write_text(good.replace('"gpu_count":8', '"gpu_count":' + "9" * 100_000, 1))
    overlay = tmp / "overlay"
    overlay.mkdir()
    (overlay / "redos.toml").write_text(OVERLAYS["alt.toml"][0])
    return [
        ("gzip bomb (2 GiB of lines)", ["logs", str(tmp / "bomb.gz")], None),
        ("bz2 bomb (2 GiB of lines)", ["logs", str(tmp / "bomb.bz2")], None),
        ("truncated gzip", ["logs", str(tmp / "cut.gz")], None),
        ("glob through symlink loops", ["logs", str(tmp / "loop" / "**")], None),
        ("stdin, 64 MiB with --max-bytes 8M", ["logs", "--max-bytes", "8M", "-"], NCCL_LINE * 800_000),
        ("topo: 300k devices XML", ["topo", "--input", str(tmp / "many.xml")], None),
        ("topo: 1M-deep XML", ["topo", "--input", str(tmp / "deep.xml")], None),
        ("topo: 40 MiB NCCL log", ["topo", "--input", str(tmp / "huge.log")], None),
        ("fleet: deep and huge summaries", ["fleet", "compare", str(fleet)], None),
        ("overlay: backtracking pattern", ["logs", "--knowledge", str(overlay), "-"], OOM),
    ]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'input class':40} {'exit':>4} {'seconds':>8} {'peak RSS':>10}  goal < {GOAL_S:g} s")
        for name, argv, stdin in cases(Path(tmp)):
            start = time.monotonic()
            rc, _, err, rss = run(*argv, stdin=stdin)
            took = time.monotonic() - start
            ok = "ok" if took < GOAL_S and "Traceback" not in err and rc in (0, 1, 2) else "MISSED"
            print(f"{name:40} {rc:>4} {took:>8.2f} {rss >> 10:>7} MiB  {ok}")


if __name__ == "__main__":
    main()
