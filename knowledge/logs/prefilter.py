"""Literal prefilter: the fixed substrings a line must contain before any regex is tried on it."""
from __future__ import annotations

import functools
import heapq
import re
import sys
from collections.abc import Iterable, Sequence

if sys.version_info >= (3, 11):
    import re._constants as _c
    import re._parser as _parser
else:  # pragma: no cover - 3.10
    import sre_constants as _c
    import sre_parse as _parser

from ..frozen import Frozen, frozen

_SEP = "\x00"  # marks a break between literal runs inside one alternative
_MAX_ALTS = 64  # cross products above this collapse to "unknown" (still correct, just less selective)
MIN_RUN = 3

# Shapes of the high-volume lines of a healthy job (NCCL INFO chatter, progress lines), written
# from their formats (NCCL's enqueue.cc INFO(NCCL_COLL, "%s: opCount %lx sendbuff ...") for every
# collective name, init.cc, channel.cc; torchtitan, Lightning, HF Trainer and Megatron progress
# lines). An anchor that occurs in them would make nearly every line a candidate, so the cover
# never picks one.
_NCCL_OPS = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "Send", "Recv", "AllToAll")
NOISE_SAMPLES = tuple(
    f"node01:40123:40175 [3] NCCL INFO {op}: opCount 1a2 sendbuff 0x7f1c00000000 recvbuff "
    "0x7f1c00000000 count 1048576 datatype 7 op 0 root 0 comm 0x55810000 [nranks=256] stream 0x5581"
    for op in _NCCL_OPS) + (
    "node01:40123:40175 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/CUMEM/read",
    "node01:40123:40175 [7] NCCL INFO Channel 01/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA",
    "node01:40123:40175 [7] NCCL INFO Channel 01/0 : 15[7] -> 7[7] [receive] via NET/Socket/1",
    "node01:40123:40175 [2] NCCL INFO Channel 02/0 : 2[2] -> 3[3] via SHM/direct/direct",
    "node01:40123:40175 [2] NCCL INFO Channel 02/24 :    0   1   2   3   4   5   6   7",
    "node01:40123:40175 [2] NCCL INFO comm 0x5581 rank 2 nranks 8 cudaDev 2 busId 3b000 - Init COMPLETE",
    "node01:40123:40175 [3] NCCL INFO Connected all rings, use ring PXN 0 GDR 1",
    "node01:40123:40175 [3] NCCL INFO Trees [0] 4/-1/-1->3->2 [1] 4/-1/-1->3->2",
    "node01:40123:40175 [3] NCCL INFO threadThresholds 8/8/64 | 128/8/64 | 512 | 512",
    "node01:40123:40175 [3] NCCL INFO 32 coll channels, 32 collnet channels, 0 nvls channels, "
    "32 p2p channels, 32 p2p channels per peer",
    "node01:40123:40175 [3] NCCL INFO P2P Chunksize set to 524288",
    "[rank3]:[titan] 2026-01-01 00:00:00,000 - root - INFO - step: 120  loss: 2.3412  "
    "memory: 61.23GiB(77.45%)  tps: 2,817  tflops: 312.40  mfu: 31.58%",
    "Epoch 1:  42%|████▏     | 420/1000 [03:12<04:25,  2.18it/s, loss=0.123, v_num=0]",
    "{'loss': 1.2345, 'grad_norm': 0.98, 'learning_rate': 1e-05, 'epoch': 0.42}",
    " iteration      120/  10000 | consumed samples:        30720 | elapsed time per iteration "
    "(ms): 1234.5 | learning rate: 1.000E-04 | global batch size:   256 | lm loss: 2.345E+00 |",
)


@frozen
class Anchored(Frozen):
    """One pattern's literal requirement: every alternative needs one of its runs present."""

    key: str
    alternatives: tuple[tuple[str, ...], ...]  # runs per alternative; () means unanchored


@functools.lru_cache(maxsize=1024)  # parsed for the plan and again for each signature's needles
def literal_alternatives(pattern: str) -> tuple[tuple[str, ...], ...] | None:
    """Mandatory literal runs of each top-level alternative, or None when some has none.

    A line can only match `pattern` if, for some alternative, it contains all of that
    alternative's runs; one run per alternative is enough for a prefilter.
    """
    try:
        parsed = _parser.parse(pattern)
    except re.error:
        return None
    if parsed.state.flags & (_c.SRE_FLAG_IGNORECASE | _c.SRE_FLAG_VERBOSE):
        return None
    out = []
    for alt in _alts(list(parsed)):
        runs = tuple(r for r in alt.split(_SEP) if len(r) >= MIN_RUN)
        if not runs:
            return None
        out.append(runs)
    return tuple(out)


def _alts(seq: list) -> list[str]:
    out = [""]
    for op, av in seq:
        if op is _c.LITERAL:
            out = [a + chr(av) for a in out]
        elif op is _c.AT:
            continue  # zero-width: the runs on both sides stay contiguous
        elif op is _c.SUBPATTERN:
            if av[1] & _c.SRE_FLAG_IGNORECASE:  # (?i:...) group
                out = [a + _SEP for a in out]
            else:
                out = _cross(out, _alts(list(av[-1])))
        elif op is _c.BRANCH:
            sub: list[str] = []
            for branch in av[1]:
                sub.extend(_alts(list(branch)))
            out = _cross(out, sub)
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT) or op is getattr(_c, "POSSESSIVE_REPEAT", None):
            low, _high, item = av
            if low >= 1:
                out = _cross(out, [_SEP + a + _SEP for a in _alts(list(item))])
            else:
                out = [a + _SEP for a in out]
        else:
            out = [a + _SEP for a in out]
    return out


def _cross(left: list[str], right: list[str]) -> list[str]:
    if len(left) * len(right) > _MAX_ALTS:
        return [a + _SEP for a in left]
    return [a + b for a in left for b in right]


_ENGLISH = "etaoinshrdlcumwfgypbvkjxqz"


@functools.lru_cache(maxsize=1)
def _char_freq() -> dict[str, float]:
    """Estimated per-byte frequency of each character in log text (noise shapes + English)."""
    noise = "\n".join(NOISE_SAMPLES)
    counts: dict[str, int] = {}
    for ch in noise:
        counts[ch] = counts.get(ch, 0) + 1
    prior = {c: 0.08 * (0.85 ** i) for i, c in enumerate(_ENGLISH)}
    out = {}
    for ch in set(noise) | set(_ENGLISH) | set(_ENGLISH.upper()):
        eng = prior.get(ch.lower(), 0.002) * (0.15 if ch.isupper() else 0.6)
        out[ch] = max(counts.get(ch, 0) / len(noise), eng)
    return out


# Cost of one pass, in seconds per GB measured on NCCL-heavy logs (CPython 3.11): bytes.find gets
# faster with longer needles; a char-rooted regex scans at about 3.5 GB/s (sre's loop over a
# literal first character) plus ~23 ns per occurrence of its root character (a match attempt),
# ~1.5 ns when the regex is one literal (sre compares its next characters in the same loop).
# A root character rarer than RARE is found with bytes.find instead (memchr, ~20 GB/s), at
# ~0.5 us a match attempt from Python: see scan.py.
RARE = 4e-4


def _literal_cost(gram: str, freq: dict[str, float]) -> float:
    # what the cover weighs: bytes.find's cost (with sre's, the cover takes more, shorter passes,
    # and their fixed cost adds up); the cheaper of the two runs (plan)
    return _find_cost(gram)


def _find_cost(gram: str) -> float:
    return 1.0 / (0.9 + 0.14 * min(len(gram), 40))


def _search_cost(gram: str, freq: dict[str, float]) -> float:
    f = freq.get(gram[0], 0.002)
    return 0.05 + 500.0 * f if f < RARE else 0.27 + 1.5 * f


def _root_cost(ch: str, freq: dict[str, float]) -> float:
    f = freq.get(ch, 0.002)
    return 0.05 + 500.0 * f if f < RARE else 0.27 + 23.0 * f


def sample_freq(sample: bytes) -> tuple[tuple[str, float], ...]:
    """Character frequencies of a sample of the input, blended with the built-in estimate and
    rounded (they key the plan cache)."""
    model = _char_freq()
    n = max(len(sample), 1)
    out = []
    for b in range(32, 127):
        ch = chr(b)
        p = 0.95 * sample.count(bytes([b])) / n + 0.05 * model.get(ch, 0.002)
        out.append((ch, round(p, 4)))
    return tuple(out)


ROOT_TAIL = 10  # characters after the root that a char-rooted alternative must match


@frozen
class Plan(Frozen):
    """How to find candidate lines: plain substrings, plus char-rooted tries of short literals."""

    literals: tuple[str, ...]  # found by bytes.find
    roots: tuple[tuple[str, tuple[str, ...]], ...]  # (root char, literals starting with it)
    rare: frozenset[str] = frozenset()  # root chars rare in the input: found by bytes.find
    searched: frozenset[str] = frozenset()  # literals among the roots, each a group of its own

    def describe(self) -> str:
        groups = [(c, t) for c, t in self.roots if not (len(t) == 1 and t[0] in self.searched)]
        return (f"{len(self.literals) + len(self.searched)} literal(s)"
                + (f" ({len(self.searched)} by regex: {', '.join(map(repr, sorted(self.searched)))})"
                   if self.searched else "")
                + f", {len(groups)} rooted group(s): "
                + ", ".join(f"{c!r}x{len(t)}{'*' if c in self.rare else ''}" for c, t in groups)
                + (" (* found by bytes.find)" if self.rare else ""))


@functools.lru_cache(maxsize=16)
def plan(items: tuple[Anchored, ...], freq: tuple[tuple[str, float], ...] | None = None) -> Plan:
    """Cover every alternative of every item with as little scanning as possible.

    Weighted greedy set cover (lazy), then a local search that drops a pass where cheaper ones do
    its work: a candidate is either a substring (one bytes.find pass) or a root character (one
    regex pass matching a trie of literals that start with it; for a character rare in the
    input, bytes.find between its occurrences). Nothing that occurs in ordinary healthy log
    lines is used unless an alternative has nothing else.
    """
    noise = "\n".join(NOISE_SAMPLES)
    freqs = dict(freq) if freq else _char_freq()
    universe: list[tuple[str, ...]] = [runs for item in items for runs in item.alternatives]
    literal_cover: dict[str, set[int]] = {}
    root_cover: dict[str, dict[int, str]] = {}
    for idx, runs in enumerate(universe):
        for run in runs:
            for gram in _grams(run):
                if gram not in noise:
                    literal_cover.setdefault(gram, set()).add(idx)
            for pos, ch in enumerate(run):
                lit = _rooted(run, pos, noise)
                if lit:
                    best = root_cover.setdefault(ch, {}).get(idx)
                    if best is None or len(lit) > len(best):
                        root_cover[ch][idx] = lit

    def cost(p: tuple[str, str]) -> float:
        return _literal_cost(p[1], freqs) if p[0] == "lit" else _root_cost(p[1], freqs)

    def covers(p: tuple[str, str]) -> set[int]:
        return literal_cover[p[1]] if p[0] == "lit" else set(root_cover[p[1]])

    touch: dict[int, set[Pass]] = {}  # alternative -> the passes that find it
    for gram, cov in literal_cover.items():
        for i in cov:
            touch.setdefault(i, set()).add(("lit", gram))
    for ch, cov2 in root_cover.items():
        for i in cov2:
            touch.setdefault(i, set()).add(("root", ch))
    chosen, forced = _cover(set(range(len(universe))), touch, cost, covers)
    chosen = _improve(chosen, touch, cost, covers)
    literals = {k for kind, k in chosen if kind == "lit"} | {max(universe[i], key=len) for i in forced}
    # each alternative a literal does not find goes to its cheapest chosen root
    roots: dict[str, set[str]] = {}
    by_cost = sorted((k for kind, k in chosen if kind == "root"), key=lambda ch: _root_cost(ch, freqs))
    for idx in range(len(universe)):
        if idx in forced or any(idx in literal_cover[k] for kind, k in chosen if kind == "lit"):
            continue
        ch = next(c for c in by_cost if idx in root_cover[c])
        roots.setdefault(ch, set()).add(root_cover[ch][idx])
    # a literal sre finds faster than bytes.find is a rooted group of its own (one tail)
    searched = {g for g in literals if _search_cost(g, freqs) < _find_cost(g)}
    groups = [(ch, _prefix_free(lits)) for ch, lits in roots.items()] + [(g[0], (g,)) for g in searched]
    rare = frozenset(ch for ch, _t in groups if freqs.get(ch, 0.002) < RARE)
    return Plan(tuple(sorted(literals - searched, key=lambda g: (-len(g), g))), tuple(sorted(groups)), rare,
                frozenset(searched))


Pass = tuple[str, str]  # ("lit", substring) or ("root", char)


def _cover(need: set[int], touch: dict[int, set[Pass]], cost, covers,
           banned: frozenset[Pass] = frozenset()) -> tuple[set[Pass], set[int]]:
    """Weighted greedy set cover (lazy) of `need`: the passes, and what none can cover (every
    run noise-like)."""
    heap: list[tuple[float, int, str, str]] = []
    for kind, key in set().union(*(touch.get(i, ()) for i in need)) - banned if need else ():
        gain = len(covers((kind, key)) & need) / cost((kind, key))
        heap.append((-gain, -len(key) if kind == "lit" else 0, kind, key))
    heapq.heapify(heap)
    uncovered = set(need)
    chosen: set[Pass] = set()
    while uncovered and heap:
        _neg, neg_len, kind, key = heapq.heappop(heap)
        covered = covers((kind, key)) & uncovered
        gain = len(covered) / cost((kind, key))
        if gain <= 0:
            continue
        if heap and gain < -heap[0][0] - 1e-12:
            heapq.heappush(heap, (-gain, neg_len, kind, key))
            continue
        chosen.add((kind, key))
        uncovered -= covered
    return chosen, uncovered


def _improve(chosen: set[Pass], touch: dict[int, set[Pass]], cost, covers) -> set[Pass]:
    """Local search after the greedy: drop a pass (costliest first) when the alternatives only it
    finds are found more cheaply by others (the greedy takes a frequent root such as 'e' early
    for its many tails, where a few rare roots do the same for less)."""
    for _round in range(len(chosen) + 4):
        for p in sorted(chosen, key=cost, reverse=True):
            rest = chosen - {p}
            others: set[int] = set().union(*(covers(q) for q in rest)) if rest else set()
            need = covers(p) - others
            if not need:
                chosen = rest
                break
            add, left = _cover(need, touch, cost, covers, frozenset({p}))
            if not left and sum(cost(q) for q in add) < cost(p) - 1e-9:
                chosen = rest | add
                break
        else:
            return chosen
    return chosen


def _rooted(run: str, pos: int, noise: str) -> str:
    """The literal of `run` starting at `pos` used in a root group, or '' if too short or noisy."""
    lit = run[pos:pos + 1 + ROOT_TAIL]
    if len(lit) < 5:
        return ""
    return "" if lit in noise else lit


def _prefix_free(lits: Iterable[str]) -> tuple[str, ...]:
    # a literal that extends a shorter one adds nothing to a prefilter
    out: list[str] = []
    for lit in sorted(set(lits), key=len):
        if not any(lit.startswith(o) for o in out):
            out.append(lit)
    return tuple(sorted(out))


def trie_regex(literals: Iterable[str]) -> str:
    """A regex matching any of the literals, factored as a trie (sre tries branches in order)."""
    trie: dict = {}
    for lit in literals:
        node = trie
        for ch in lit:
            node = node.setdefault(ch, {})
        node[""] = {}
    return _trie_to_regex(trie)


def _trie_to_regex(node: dict) -> str:
    if "" in node and len(node) == 1:
        return ""
    parts = []
    optional = "" in node
    for ch in sorted(k for k in node if k):
        child = node[ch]
        # collapse single-child chains into one literal run
        run = ch
        while len(child) == 1 and "" not in child:
            (nxt, child), = child.items()
            run += nxt
        parts.append(re.escape(run) + _trie_to_regex(child))
    body = parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"
    if optional:
        return "(?:" + body + ")?"
    return body


_GRAM_LENGTHS = (6, 11, 24)  # more lengths made the same plans, twice as slowly


def _grams(run: str) -> Iterable[str]:
    if len(run) <= 6:
        yield run
        return
    for length in _GRAM_LENGTHS:
        if length > len(run):
            yield run[:32] if len(run) > 32 else run
            return
        for start in range(len(run) - length + 1):
            yield run[start:start + length]


def build_items(patterns: Sequence[tuple[str, str]]) -> tuple[tuple[Anchored, ...], tuple[str, ...]]:
    """(anchored items, keys of unanchored patterns) for (key, pattern) pairs."""
    items, unanchored = [], []
    for key, pattern in patterns:
        alts = literal_alternatives(pattern)
        if alts is None:
            unanchored.append(key)
        else:
            items.append(Anchored(key, alts))
    return tuple(items), tuple(unanchored)
