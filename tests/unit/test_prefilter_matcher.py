"""The prefilter's matcher (scan.found_lines) finds exactly the lines the regex-only scan found
before it (one sre search per rooted group, bytes.find per literal), whichever way it finds each
group: bytes.find and startswith (a rare root, or a small input), its regex, or bytes.find that
gives up and searches. Checked on every real log of the shared fixtures and on a seeded
generator of lines built from the plan's own literals, cut, joined and mixed with noise."""
from __future__ import annotations

import dataclasses
import functools
import random
import re

import pytest
from fixturekit import shared_fixtures

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.logs import compiled, scan
from distdoctor.knowledge.logs.prefilter import NOISE_SAMPLES, sample_freq, trie_regex

KB = load_knowledge(use_env=False, tree=False)


def reference(comp: compiled.Compiled, data: bytes, end: int) -> set[int]:
    """The scan as it was: every literal with bytes.find, every rooted group with its trie
    regex (built here from the plan's strings, as compiled.py built it)."""
    out: set[int] = set()
    for lit in comp.finds:
        pos = data.find(lit, 0, end)
        while pos >= 0:
            out.add(data.rfind(b"\n", 0, pos) + 1)
            nl = data.find(b"\n", pos, end)
            if nl < 0:
                break
            pos = data.find(lit, nl + 1, end)
    for rx in _old_regexes(comp.plan.roots):
        m = rx.search(data, 0, end)
        while m is not None:
            out.add(data.rfind(b"\n", 0, m.start()) + 1)
            nl = data.find(b"\n", m.start(), end)
            if nl < 0:
                break
            m = rx.search(data, nl + 1, end)
    return out


@functools.lru_cache(maxsize=8)
def _old_regexes(roots: tuple) -> list[re.Pattern[bytes]]:
    return [re.compile((re.escape(c) + trie_regex([t[1:] for t in tails])).encode()) for c, tails in roots]


def _fresh(comp: compiled.Compiled, every_rare: bool = False) -> compiled.Compiled:
    """The same plan with no group regex compiled yet (every root taken as rare: all found with
    bytes.find first)."""
    groups = tuple(compiled._rooted(c, tails, every_rare or c in comp.plan.rare) for c, tails in comp.plan.roots)
    return dataclasses.replace(comp, groups=groups)


MODES = ("small input: find and startswith", "large input: regex, or find where the block has few roots",
         "every group rare: find, gives up")


def _found(comp: compiled.Compiled, data: bytes, end: int, mode: str,
           monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """found_lines the way `mode` says. In the first and last modes no group is compiled but by
    the fallback, which compiles it in every mode alike: one fresh copy per plan serves."""
    if mode == MODES[0]:
        comp = _fresh_for(comp, False)
        monkeypatch.setattr(scan, "_scanned", [0])
    elif mode == MODES[1]:
        monkeypatch.setattr(scan, "_scanned", [scan.SMALL_INPUT])
    else:
        comp = _fresh_for(comp, True)
    return scan.found_lines(comp, data, end)


_FRESH: dict[tuple[int, bool], compiled.Compiled] = {}


def _fresh_for(comp: compiled.Compiled, every_rare: bool) -> compiled.Compiled:
    key = (id(comp), every_rare)
    if key not in _FRESH:
        _FRESH[key] = _fresh(comp, every_rare)
    return _FRESH[key]


def _plans() -> list[compiled.Compiled]:
    """The built-in plan and ones tuned to very different inputs (other groups, other rare roots)."""
    text = "\n".join(NOISE_SAMPLES)
    return [compiled.compile_kb(KB), compiled.compile_kb(KB, sample_freq(text.encode())),
            compiled.compile_kb(KB, sample_freq(b"UDA WARN SIGBUS Error _x Exception " * 300))]


def _real_logs() -> list[bytes]:
    out = []
    for base in ("logs", "logs-batch2", "healthy", "recorded"):
        for path in sorted(shared_fixtures(base).rglob("*")):
            if path.is_file() and path.stat().st_size <= 4 << 20 and path.suffix not in (".gz", ".bz2", ".xz"):
                out.append(path.read_bytes())
    return out


@pytest.mark.parametrize("mode", MODES)
def test_the_real_logs_give_the_same_lines(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = _real_logs()
    if not logs:
        pytest.skip("no shared fixtures here")
    found = 0
    for comp in _plans():
        for data in logs:
            want = reference(comp, data, len(data))
            assert _found(comp, data, len(data), mode, monkeypatch) == want
            found += len(want)
    assert found > 100  # the fixtures do hold failures


def _generated(rng: random.Random, comp: compiled.Compiled) -> bytes:
    """Lines of noise with the plan's literals put in whole, cut short by a byte, with their
    root alone, at line starts and ends, several to a line, in CRLF, with non-ASCII bytes."""
    lits = [t for g in comp.groups for t in g.tails] + list(comp.finds)
    noise = [s.encode() for s in NOISE_SAMPLES] + [b"", b"x", "r\u00e9sum\u00e9 \u2588\u2588".encode()]
    lines = []
    for _ in range(400):
        parts = [rng.choice(noise)[: rng.randrange(0, 120)]]
        for _k in range(rng.randrange(0, 3)):
            lit = rng.choice(lits)
            how = rng.randrange(4)
            piece = lit if how == 0 else lit[:-1] if how == 1 else lit[:1] if how == 2 else lit[:1] + lit
            parts.insert(rng.randrange(len(parts) + 1), piece)
        lines.append(b"".join(parts) + (b"\r" if rng.random() < 0.1 else b""))
    data = b"\n".join(lines)
    return data if rng.random() < 0.5 else data + b"\n"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", range(4))
def test_generated_logs_give_the_same_lines(seed: int, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    for comp in _plans():
        data = _generated(rng, comp)
        # a block ends before the buffer does: a literal cut by `end` must not count
        end = len(data) - rng.randrange(0, 40)
        want = reference(comp, data, end)
        assert want, "the generator puts literals in"
        assert _found(comp, data, end, mode, monkeypatch) == want


def test_a_literal_that_runs_past_the_block_end_is_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    comp = compiled.compile_kb(KB)
    tail = comp.groups[0].tails[0]
    data = b"plain line\n" + tail + b" and more\n"
    end = len(b"plain line\n") + len(tail) - 1
    for mode in MODES:
        assert _found(comp, data, end, mode, monkeypatch) == set()
        assert _found(comp, data, len(data), mode, monkeypatch) == {len(b"plain line\n")}


@pytest.mark.parametrize("later", [10, 5000])
def test_a_root_missing_from_a_big_block_s_first_bytes(later: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A block big enough to be probed whose first 64 KiB lack a group's root character: the
    group is found with bytes.find, and where the character turns out common further on (5000
    times), the search takes over; the same lines as the regex-only scan either way."""
    comp = compiled.compile_kb(KB)
    group = max((g for g in comp.groups if not g.rare), key=lambda g: len(g.tails))
    filler = bytes(b for b in b"node01 step 42 loss 1.25 tps 2817 mfu 31.58 percent\n" if b != group.root[0])
    head = filler * (scan.PROBE // len(filler) + 1)
    rng = random.Random(later)
    body = b"".join(rng.choice(group.tails) + b" " + group.root * 3 + b" x\n" if rng.random() < later / 20000
                    else filler for _ in range(20000))
    data = head + body
    assert len(data) >= 8 * scan.PROBE
    monkeypatch.setattr(scan, "_scanned", [scan.SMALL_INPUT])
    fresh = _fresh(comp)
    assert scan.found_lines(fresh, data, len(data)) == reference(comp, data, len(data))
    # found with bytes.find first: compiled only when it gave up (many occurrences)
    assert fresh.groups[comp.groups.index(group)].compiled == (later > 1000)


@pytest.mark.parametrize("seed", range(3))
def test_blanking_communicator_ids_is_the_substitution(seed: int) -> None:
    """scan.blank_comm_ids (split and join) gives what re.sub with the group template gave."""
    rng = random.Random(seed)
    pieces = [b"comm", b"commId", b" 0x", b"0x", b"ab", b"12", b" ", b"c", b"Id", b"g", b"comm 0x", b"\xff"]
    for _ in range(20000):
        raw = b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 14)))
        assert scan.blank_comm_ids(raw) == scan._COMM_ID.sub(rb"\1", raw), raw
    line = b"node0:1:2 [0] NCCL INFO comm 0x55d9607ee240 rank 3 nranks 8 commId 0x5c1d0e1f7a2b - Init START"
    assert scan.blank_comm_ids(line) == b"node0:1:2 [0] NCCL INFO comm 0x rank 3 nranks 8 commId 0x - Init START"
