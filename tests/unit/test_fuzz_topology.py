"""Fuzz: seeded random mutations of every topology fixture never end in a traceback, and memory
stays proportional to the input (issue 11). A failure prints the seed and case to replay it."""
from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

import pytest
from fixturekit import HERE_FIXTURES, shared_fixtures
from fuzzkit import mutate

from distdoctor.probes.topology import draw_matrix, draw_text, to_dot, to_svg
from distdoctor.probes.topology.assess import analyse
from distdoctor.probes.topology.load import TopologyInputError, parse_text

SEED = 11
MEASURE_EVERY = 25  # tracemalloc slows Python ~3x: every 25th case has its peak measured
# Peak Python memory of one case: a fixed allowance (the knowledge, the graph, the drawings)
# plus a multiple of the input; the adversarial pass saw 23 GB for a 32 MiB input.
BASE_BYTES = 16 << 20
PER_INPUT_BYTE = 60


def texts(folder: Path) -> list[tuple[str, str]]:
    return [(p.name, p.read_text(encoding="utf-8", errors="replace"))
            for p in sorted(folder.glob("*.txt")) if p.name != "README.md"]


def one(text: str) -> None:
    """The whole `topo --input` path after reading: parse, judge, draw every way."""
    try:
        topo = parse_text(text, "fuzz")
    except TopologyInputError as exc:
        assert "\n" not in str(exc)  # the CLI prints it as its one line
        return
    facts = analyse(topo, "fuzz")
    for draw in (draw_text, draw_matrix, to_dot, to_svg):
        assert isinstance(draw(facts), str)
    assert facts["p2p"] in ("all", "none", "partial", "unknown", "usable", "unusable") or facts["p2p"]


def fuzz(corpus: list[tuple[str, str]], cases: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    peaks: dict[str, int] = {}
    for case in range(cases):
        name, original = corpus[rng.randrange(len(corpus))]
        text = mutate(original, rng)
        measure = case % MEASURE_EVERY == 0
        if measure:
            tracemalloc.start()
        try:
            one(text)
        except Exception as exc:  # the test's point: name the case that raised
            raise AssertionError(f"case {case} (seed {seed}, from {name}, {len(text)} chars) raised "
                                 f"{type(exc).__name__}: {exc}") from exc
        finally:
            if measure:
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
        if measure:
            allowed = BASE_BYTES + PER_INPUT_BYTE * len(text)
            assert peak < allowed, f"case {case} from {name}: peak {peak} B for {len(text)} chars"
            peaks[f"{case}:{name}"] = peak
    return peaks


def test_fuzz_the_project_fixtures() -> None:
    corpus = texts(HERE_FIXTURES / "topology")
    assert len(corpus) >= 5
    peaks = fuzz(corpus, 1200, SEED)
    assert len(peaks) == 1200 // MEASURE_EVERY


def test_fuzz_the_shared_fixtures() -> None:
    corpus = texts(shared_fixtures("topology"))
    assert len(corpus) >= 10
    fuzz(corpus, 1200, SEED + 1)


@pytest.mark.parametrize("piece", ["0x", "0x03:", "dev", "0x:", "-1", "99999999999"])
def test_malformed_bus_ids_and_indices_are_skipped_with_a_reason(piece: str) -> None:
    # the five tracebacks the adversarial pass found: nccl-tests brackets, XML busids, devices
    text = ("# Rank  0 Group  0 Pid 100 on node1 device  0 [0x1b] NVIDIA H100\n"
            f"# Rank  1 Group  0 Pid 101 on node1 device  1 [{piece}] NVIDIA H100\n")
    topo = parse_text(text, "t")
    assert [g.index for g in topo.gpus.values()] == [0]
    if all(c in "0123456789abcdefABCDEFx:." for c in piece):  # else not a device line at all
        assert any("Skipped 1" in n and repr(piece) in n for n in topo.notes), topo.notes
    xml = ('<system version="1"><cpu numaid="0"><pci busid="0000:1b:00.0" class="0x030200" '
           f'vendor="0x10de"><gpu dev="0"/></pci><pci busid="{piece}" class="0x030200" '
           'vendor="0x10de"><gpu dev="1"/></pci></cpu></system>')
    topo = parse_text(xml, "x")
    assert sorted(topo.gpus) == ["GPU0"]
    assert any("malformed busid" in n for n in topo.notes), topo.notes


def test_device_numbers_past_any_real_node_are_skipped_not_allocated() -> None:
    # `[dev]` 99999999 once made the parser list 10^8 implied GPUs (MemoryError)
    text = ("host:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
            "host:1:1 [99999999] NCCL INFO cudaDev 99999999 busId 1b000\n")
    tracemalloc.start()
    try:
        topo = parse_text(text, "t")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sorted(topo.gpus) == ["GPU0", "GPU1"]
    assert any("above 1023" in n for n in topo.notes)
    assert peak < BASE_BYTES
