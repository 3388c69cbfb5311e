"""Compiled.matcher (issue 25, item 15) finds the signatures whose needles a candidate line
holds with one regex over all needles; it must name exactly the signatures, and the harmless
verdict, that testing every needle with `in` does."""
from __future__ import annotations

import random

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.logs import collect
from distdoctor.knowledge.logs.collect import Collector
from distdoctor.knowledge.logs.compiled import Sig, _matcher, _needles, compile_kb
from distdoctor.knowledge.logs.extractors import TABLE

KB = load_knowledge(use_env=False)
COMP = compile_kb(KB)


def _by_in(sigs, harmless, text, words=()):
    idx = [i for i, s in enumerate(sigs) if not s.needles or any(n in text for n in s.needles)]
    return (idx, harmless is None or any(n in text for n in harmless),
            [i for i, ws in enumerate(words) if any(w in text for w in ws)])


def _sig(i: int, needles: tuple[str, ...]) -> Sig:
    return Sig(f"s{i}", "c", 1.0, frozenset(), "x", needles)


def test_overlapping_and_nested_needles() -> None:
    # needles that start inside another, share a prefix, or are a prefix of another
    sigs = (_sig(0, ("ab",)), _sig(1, ("bc",)), _sig(2, ("abcd", "zz")), _sig(3, ("abc",)), _sig(4, ()),
            _sig(5, ("d",)))
    words = (("bcd", "z"), ("c",), ("ab",))  # extractors' words, some also needles
    m = _matcher(sigs, ("cd",), words)
    rng = random.Random(3)
    for _ in range(3000):
        text = "".join(rng.choice("abcdz ") for _ in range(rng.randrange(12)))
        assert m.scan(text) == _by_in(sigs, ("cd",), text, words), text
    assert _matcher(sigs, None).scan("q") == ([4], True, [])  # a harmless pattern without needles


def test_the_knowledge_base_needles_on_real_lines() -> None:
    m = COMP.matcher
    harmless = [n for p in COMP.harmless_patterns for n in _needles(p)]
    words = tuple(e.words for e in TABLE)
    needles = sorted({n for s in COMP.sigs for n in s.needles} | set(harmless) | {w for ws in words for w in ws})
    rng = random.Random(11)
    for _ in range(2000):
        parts = rng.sample(needles, rng.randrange(4))
        text = "x".join(p[rng.randrange(len(p)):] if rng.random() < 0.3 else p for p in parts)
        assert m.scan(text) == _by_in(COMP.sigs, harmless, text, words), text


def test_the_collector_records_the_same_either_way(monkeypatch) -> None:
    rng = random.Random(7)
    needles = sorted({n for s in COMP.sigs for n in s.needles} | {w for e in TABLE for w in e.words})
    lines = [f"[rank{rng.randrange(4)}]: " + " ".join(rng.sample(needles, 2)) for _ in range(300)]
    results = []
    for limit in (0, 10 ** 9):  # the matcher from the first line; never
        monkeypatch.setattr(collect, "MATCHER_AFTER", limit)
        monkeypatch.setattr(collect, "_fed", [0])
        col = Collector(COMP)
        col.begin("/logs/rank0.log")
        for n, t in enumerate(lines, 1):
            col.feed(n, t)
        results.append({k: v for k, v in vars(col).items() if k not in ("comp", "file")})
    assert results[0] == results[1]
    assert results[0]["counts"], "some line matched a signature"
    assert results[0]["facts"] or results[0]["exceptions"], "some extractor ran"
