"""NCCL's repeated init and transport lines are read once per process and kind (issue 11).

A job that makes many communicators prints the same `Bootstrap : Using`, `NET/IB : Using`,
`Init COMPLETE` lines for each; scan.py drops the repeats before they are decoded. These tests
prove the drop changes no result and never touches a line that is evidence.
"""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
from fixturekit import shared_fixtures

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.logs import analyse, scan
from distdoctor.knowledge.logs.collect import ELASTIC_SPAN, Collector
from distdoctor.knowledge.logs.compiled import _compile, compile_kb, kb_key
from distdoctor.knowledge.logs.sources import Block

KB = load_knowledge(use_env=False)


def _init(rank: int, comm: int, size: int) -> list[str]:
    # the formats of NCCL's bootstrap.cc, net_ib.cc and init.cc; the address and id differ per comm
    p = f"node0:{4000 + rank}:{4000 + rank} [{rank}]"
    addr, cid = f"0x55d9{comm * 7919:08x}", f"0x{comm * 104729:x}"
    me = rank % size
    return [f"{p} NCCL INFO Bootstrap : Using eth0:10.0.0.{rank + 1}<0>",
            f"{p} NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.{rank + 1}<0>",
            f"{p} NCCL INFO Using network IB",
            f"{p} NCCL INFO ncclCommInitRank comm {addr} rank {me} nranks {size} cudaDev {rank} "
            f"busId {rank + 1}8000 commId {cid} - Init START",
            f"{p} NCCL INFO comm {addr} rank {me} nRanks {size} nNodes 1 localRanks {size} localRank {me}",
            f"{p} NCCL INFO Channel 00/0 : {me}[{rank}] -> {(me + 1) % size}[0] via P2P/CUMEM/read",
            f"{p} NCCL INFO ncclCommInitRank comm {addr} rank {me} nranks {size} cudaDev {rank} "
            f"busId {rank + 1}8000 commId {cid} - Init COMPLETE"]


def _write_ranks(root: Path, comms: int) -> list[str]:
    paths = []
    for rank in range(2):
        lines = [f"{rank}: starting"]
        for comm in range(comms):
            lines += _init(rank, comm, (2, 1, 2, 1)[comm % 4])
            lines += [f"[rank{rank}]: step {comm} loss 1.{comm:04d}"] * 3
        if rank == 1:
            lines.append("[rank1]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
        path = root / f"rank{rank}.log"
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path))
    return paths


def _candidates(text: str, comp=None) -> list[str]:
    # a block's first lines are always kept (they may follow a torchelastic line of the block
    # before): start with filler
    data = ("filler\n" * (ELASTIC_SPAN + 1) + text).encode()
    starts, via, _ = scan.candidates(comp or compile_kb(KB), Block(data, len(data), 1), 0)
    return [data[s:data.find(b"\n", s)].decode() for s in starts if s not in via]


def _same(a, b) -> None:
    assert [c.to_dict() for c in a.causes] == [c.to_dict() for c in b.causes]
    assert (a.facts, a.ranks, a.timeline, a.culprit, a.summary) == (b.facts, b.ranks, b.timeline,
                                                                     b.culprit, b.summary)


def test_repeated_init_lines_are_read_once_and_decide_the_same(tmp_path: Path, monkeypatch) -> None:
    paths = _write_ranks(tmp_path, 60)
    text = Path(paths[0]).read_text()
    kept = _candidates(text)
    # 60 communicators of two shapes: the first of each line kind, not 60 x 6
    assert len([t for t in kept if "NCCL INFO" in t]) <= 3 + 3 * 2 + 2, kept
    assert sum("Init COMPLETE" in t for t in text.splitlines()) == 60
    dropped = analyse(paths, KB)
    monkeypatch.setattr(scan, "_drop_repeats", lambda comp, data, end, starts: starts)
    whole = analyse(paths, KB)
    _same(dropped, whole)
    assert dropped.top is not None and dropped.top.id == "cuda-oom" == whole.top.id
    assert dropped.facts == whole.facts and dropped.facts, dropped.facts


def test_a_repeated_line_that_is_evidence_is_never_dropped() -> None:
    line = "node0:4000:4000 [0] NCCL INFO Call to connect returned Connection refused, retrying"
    other = "node0:4000:4000 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>"
    kept = _candidates("\n".join([line, other] * 40) + "\n")
    assert kept.count(line) == 40 and kept.count(other) == 1


def test_lines_after_a_torchelastic_rank_line_are_all_kept() -> None:
    other = "node0:4000:4000 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>"
    lines = ["filler"] * 12 + [other] * 3 + ["  rank      : 1 (local_rank: 1)"] + [other] * 5
    kept = _candidates("\n".join(lines) + "\n")
    # one before the torchelastic line; after it, the lines may belong to its rank
    assert kept.count(other) == 1 + 5


def test_a_pattern_on_communicator_addresses_turns_the_blanking_off() -> None:
    rows, harmless, freq, _plan = kb_key(KB)
    odd = ("site-comm", r"comm 0x7\w+ rank", "other", 1.0, ("failure",))
    comp = _compile((rows + (odd,), harmless, freq))
    assert compile_kb(KB).comm_ids_free and not comp.comm_ids_free
    text = "\n".join("\n".join(_init(0, c, 2)) for c in range(10)) + "\n"
    complete = [t for t in _candidates(text, comp) if "Init COMPLETE" in t]
    assert len(complete) == 10  # addresses differ: nothing is a repeat without the blanking
    assert len([t for t in _candidates(text) if "Init COMPLETE" in t]) == 1


def _state(col: Collector) -> dict:
    return copy.deepcopy({k: v for k, v in vars(col).items() if k not in ("comp", "_channel_memo")})


def test_what_the_scan_drops_changes_nothing_in_the_collector() -> None:
    """Every line of the real cases that the scan would drop as a repeat leaves the collector as
    it was when fed again (at another line, after other lines)."""
    comp = compile_kb(KB)
    checked = 0
    for base in ("logs", "logs-batch2", "healthy", "recorded"):
        for path in sorted(shared_fixtures(base).rglob("*")):
            if not path.is_file() or path.stat().st_size > 4 << 20:
                continue
            lines = path.read_text(errors="replace").splitlines()
            facts = [t for t in lines if scan.NCCL_INFO.decode() in t and scan.fact_only(comp, t)]
            if not facts:
                continue
            col = Collector(comp)
            col.begin(path.name)
            for n, t in enumerate(lines, 1):
                col.feed(n, t)
            for t in facts:
                before = _state(col)
                col.feed(len(lines) + 100, t)
                assert _state(col) == before, (path, t)
                checked += 1
    if checked == 0:
        pytest.skip("no NCCL INFO fact lines in the shared fixtures")
    assert checked >= 20


# ------------------------------------------------------------------ the prefilter plan
def _freq(text: str) -> tuple:
    from distdoctor.knowledge.logs.prefilter import sample_freq

    return sample_freq(text.encode())


MIXES = {
    "built-in": None,
    "nccl": _freq("\n".join(
        f"node0:1:2 [3] NCCL INFO AllReduce: opCount {i:x} sendbuff 0x7f1c count 1024 datatype 7 "
        f"op 0 root 0 comm 0x5581 [nranks=8] stream 0x55" for i in range(2000))),
    "prose": _freq("The quick brown fox jumps over the lazy dog; Error codes and warnings. " * 500),
    "uppercase": _freq("ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789 UDA MAR WARN SIGBUS " * 500),
}


@pytest.mark.parametrize("mix", sorted(MIXES))
def test_the_plan_covers_every_alternative_whatever_the_input(mix: str) -> None:
    """Whatever the sampled character mix makes the plan choose (rare roots found by bytes.find,
    frequent ones searched, literals), every alternative of every signature and trigger keeps
    a literal or a rooted tail it contains: the prefilter stays a superset."""
    from distdoctor.knowledge.logs import compiled

    rows, _harmless, _f, plan = kb_key(KB, MIXES[mix])
    items = compiled.build_items([(r[0], r[1]) for r in rows if "tail" not in r[4]])[0]
    items += compiled._trigger_items()[0]
    tails = [t for _c, ts in plan.roots for t in ts]  # each starts with its root character
    for item in items:
        for runs in item.alternatives:
            assert any(lit in run for lit in plan.literals for run in runs) or \
                any(t in run for t in tails for run in runs), (mix, item.key, runs)
    assert plan.rare <= {c for c, _t in plan.roots}


def test_a_rare_root_that_is_not_rare_falls_back_to_searching() -> None:
    """The bytes.find loop gives up after its budget of misses and searches the rest: the same
    lines either way."""
    import re

    from distdoctor.knowledge.logs.compiled import _rooted

    group = _rooted("U", ("UDA error: ", "Using "), True)
    rx = re.compile(rb"U(?:DA error: |sing )")
    body = b"".join(b"UUUU line %d Using eth0\n" % i if i % 7 == 0 else b"U U U plain %d\n" % i
                    for i in range(20000))
    found: set[int] = set()
    scan._found(body, len(body), group, found, 64)
    assert group.compiled  # it gave up on bytes.find and searched
    want = {body.rfind(b"\n", 0, m.start()) + 1 for m in rx.finditer(body)}
    assert found == want and len(want) == len(range(0, 20000, 7))


# One line per fact extractor, written from NCCL's INFO formats (init.cc, net.cc, transport.cc)
# and a per-rank epoch line; a new fact extractor fails the test below until it has one here.
FACT_SAMPLES = {
    "x-epoch-size": "[rank1]: 10 batches per epoch",
    "x-nccl-version": "node0:900:900 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
    "x-cuda-driver": "node0:900:900 [0] NCCL INFO cudaDriverVersion 12040",
    "x-using": "node0:900:900 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.0.1<0>",
    "x-network": "node0:900:900 [0] NCCL INFO Using network Socket",
    "x-no-ib": "node0:900:900 [0] NCCL INFO NET/IB : No device found.",
    "x-channel": "node0:900:900 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
    "x-comm-rank": "node0:900:900 [0] NCCL INFO comm 0x55d0 rank 0 nranks 2 cudaDev 0 busId 7000 - Init COMPLETE",
    "x-nnodes": "node0:900:900 [0] NCCL INFO comm 0x55d0 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0",
    "x-env": "node0:900:900 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
    "x-world": "[rank1]: process group ready: rank 1/4, world_size=4",
}


def test_a_fact_extractor_s_repeated_line_changes_nothing() -> None:
    """The scan drops a repeat of a line only fact extractors read (extractors.TABLE declares
    which are facts): fed again, such a line leaves the collector as it was."""
    from distdoctor.knowledge.logs.extractors import FACT, TABLE, event

    facts = [e for e in TABLE if e.repeats == FACT]
    assert {e.id for e in facts} == set(FACT_SAMPLES)
    comp = compile_kb(KB)
    for e in facts:
        line = FACT_SAMPLES[e.id]
        assert any(w in line for w in e.words) and not event(line), e.id
        col = Collector(comp)
        col.begin("rank0.log")
        col.feed(1, line)
        before = _state(col)
        col.feed(7, line)
        assert _state(col) == before, e.id
        empty = Collector(comp)
        empty.begin("rank0.log")
        assert before != _state(empty), e.id  # the line did record something
