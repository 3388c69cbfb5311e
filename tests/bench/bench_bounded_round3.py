"""Bench: the hostile inputs of issue 25 (Flight Recorder dumps, topology text, long log lines,
deep sessions) through the real CLI, with wall time and peak RSS printed against the goal (under
10 s, under 300 MiB). Run: python tests/bench/bench_bounded_round3.py"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / d) for d in ("kits", "unit", "integration")]

from boundkit import RAW_CONTROL, run  # noqa: E402
from test_bounded_fr import base_doc, shared_billion, write_set  # noqa: E402
from test_bounded_topology import CASES as TOPO, matrix  # noqa: E402
from test_redact_formats import _dump_deep, nested  # noqa: E402

GOAL_S = 10.0
GOAL_KIB = 300 << 10


def cases(tmp: Path) -> list[tuple[str, list[str], dict[str, str]]]:
    out: list[tuple[str, list[str], dict[str, str]]] = []
    docs = {r: base_doc(r) for r in range(3)}
    docs[1]["entries"][-1]["collective_seq_id"] = 2**62
    out.append(("fr: a SeqNum 2**62 past the others", ["fr", str(write_set(tmp / "seq", docs))], {}))
    docs = {r: base_doc(r) for r in range(3)}
    for entry in docs[1]["entries"]:
        entry["input_sizes"] = entry["process_group"] = entry["state"] = shared_billion()
    out.append(("fr: a list shared 10**9 times", ["fr", str(write_set(tmp / "shared", docs, "pickle"))], {}))
    docs = {r: base_doc(r) for r in range(3)}
    docs[0]["pg_config"] = {"": {"name": "", "desc": "", "ranks": "[" + "0, " * 5_000_000 + "0]"}}
    out.append(("fr: a 15 MB ranks string", ["fr", str(write_set(tmp / "ranks", docs))], {}))
    deep = tmp / "deepjson"
    deep.mkdir()
    (deep / "trace_rank_0.json").write_text('{"entries": [' + "[" * 200_000 + "]" * 200_000 + "]}")
    out.append(("fr: JSON nested 200k deep", ["fr", str(deep)], {}))
    for name in ("xml-mark-pci", "nics-found-digits", "word-2mb", "tabs-2mb"):
        (tmp / f"{name}.txt").write_text(TOPO[name])
        out.append((f"topo: {name}", ["topo", "--input", str(tmp / f"{name}.txt")], {}))
    for n in (1000, 3000):
        (tmp / f"m{n}.txt").write_text(matrix(n))
        out.append((f"topo: a {n}-GPU matrix", ["topo", "--input", str(tmp / f"m{n}.txt")], {}))
    logs = tmp / "logs"
    logs.mkdir()
    (logs / "rank1.log").write_text("x" * (3 << 20) + "\n[rank1]: ValueError: bad " + "y" * 50_000 + "\n")
    out.append(("logs: 3 MiB first line, 50k crash line", ["logs", str(logs)], {}))
    state = tmp / "state"
    (state / "distdoctor" / "sessions").mkdir(parents=True)
    record = {"schema": 1, "id": "deep", "created": 0, "updated": 0, "host": "h", "symptom": None,
              "answers": {}, "events": [{"kind": "check", "time": 0, "data": {"facts": nested(900)}}]}
    (state / "distdoctor" / "sessions" / "deep.json").write_text(_dump_deep(record))
    out.append(("report: a session nested 900 deep", ["report", "deep", "--pseudonymize"],
                {"XDG_STATE_HOME": str(state)}))
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'input (issue 25)':42} {'exit':>4} {'seconds':>8} {'peak RSS':>10}  goal < {GOAL_S:g} s, "
              f"< {GOAL_KIB >> 10} MiB")
        for name, argv, env in cases(Path(tmp)):
            start = time.monotonic()
            rc, out, err, rss = run(*argv, env={**os.environ, **env})
            took = time.monotonic() - start
            ok = (took < GOAL_S and rss < GOAL_KIB and "Traceback" not in err and rc in (0, 1, 2)
                  and not RAW_CONTROL.search(out))
            print(f"{name:42} {rc:>4} {took:>8.2f} {rss >> 10:>7} MiB  {'ok' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
