"""Fuzz: damaged fleet snapshots (seeded) are compared or skipped with a reason, never a
traceback, and memory stays bounded (issue 11)."""
from __future__ import annotations

import json
import random
import tracemalloc
from pathlib import Path

from fleet_gen import base_snapshot
from fuzzkit import mutate_json

from distdoctor.probes.fleet import compare, load_snapshots
from distdoctor.probes.fleet.load import parse_record, read_record
from distdoctor.probes.fleet.schema import MAX_DEPTH, bounds_problem

SEED = 16
CASES = 1500


def documents() -> list[str]:
    """A snapshot as collect writes it, pretty and compact (the fast and the whole-file path)."""
    doc = base_snapshot()
    return [json.dumps(doc, indent=2), json.dumps(doc, separators=(",", ":"))]


def test_fuzz_snapshot_bytes_in_memory() -> None:
    rng = random.Random(SEED)
    corpus = documents()
    outcomes = {"record": 0, "skipped": 0}
    tracemalloc.start()
    try:
        for case in range(CASES):
            text = mutate_json(corpus[rng.randrange(len(corpus))], rng)
            try:
                record, reason = parse_record(text.encode("utf-8", "surrogatepass"), "fuzz.json")
            except Exception as exc:
                raise AssertionError(f"case {case} (seed {SEED}) raised {type(exc).__name__}: {exc}") from exc
            if record is None:
                assert reason and "\n" not in reason
                outcomes["skipped"] += 1
            else:
                # what is kept is bounded and usable: compare() takes it as it is
                assert bounds_problem(record["fields"]) == ""
                outcomes["record"] += 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # both kinds happen: the mutations neither always break nor never break a snapshot
    assert outcomes["record"] > 50 and outcomes["skipped"] > 50, outcomes
    assert peak < 64 << 20


def test_fuzz_snapshot_files_through_load_and_compare(tmp_path: Path) -> None:
    rng = random.Random(SEED + 1)
    corpus = documents()
    for i in range(300):
        text = mutate_json(corpus[rng.randrange(len(corpus))], rng)
        (tmp_path / f"n{i:03d}.json").write_bytes(text.encode("utf-8", "surrogatepass"))
    good = json.loads(corpus[0])
    for i in range(5):  # a healthy majority, so compare has something to hold the rest against
        (tmp_path / f"ok{i}.json").write_text(json.dumps(dict(good, host=f"ok-{i}")))
    records, skipped = load_snapshots([tmp_path])
    assert len(records) + len(skipped) == 305
    assert all(s["reason"] and "\n" not in s["reason"] for s in skipped)
    result = compare(records, skipped)
    json.dumps(result)  # everything it returns can be written out (no OutOfRange, inf, NaN)
    assert result["nodes"] == len(records)


def test_hostile_summaries_are_skipped_naming_the_field(tmp_path: Path) -> None:
    doc = base_snapshot()
    text = json.dumps(doc, separators=(",", ":"))
    hostile = {
        "deep.json": text.replace('"switches":{', '"switches":{"X":' + "[" * (MAX_DEPTH + 4)
                                  + "]" * (MAX_DEPTH + 4) + ',', 1),
        "deeper.json": text.replace('"switches":{', '"switches":{"X":' + "[" * 100_000
                                    + "]" * 100_000 + ',', 1),
        "bigint.json": text.replace('"gpu_count":8', '"gpu_count":' + "9" * 5000, 1),
        "int4000.json": text.replace('"gpu_count":8', '"gpu_count":' + "9" * 4000, 1),
        "inf.json": text.replace('"gpu_count":8', '"gpu_count":1e999', 1),
        "nan.json": text.replace('"gpu_count":8', '"gpu_count":NaN', 1),
    }
    for name, body in hostile.items():
        assert body != text, name
        (tmp_path / name).write_text(body)
    reasons = {}
    for name in hostile:
        record, reason = read_record(str(tmp_path / name), {})
        assert record is None, name
        reasons[name] = reason
    assert "$.summary.switches.X" in reasons["deep.json"] and "nested" in reasons["deep.json"]
    assert "nested deeper" in reasons["deeper.json"]
    for name in ("bigint.json", "int4000.json", "inf.json", "nan.json"):
        assert "$.summary.gpu_count: number out of range" in reasons[name], reasons[name]
