"""The knowledge base's signatures compiled for streaming: regexes, guards and the prefilter plan."""
from __future__ import annotations

import functools
import re

from .. import rxcache
from ..frozen import Frozen, frozen
from ..model import KnowledgeBase
from . import plancache
from .extractors import TABLE, TRIGGERS as TRIGGER_PATTERNS
from .prefilter import Plan, build_items, literal_alternatives, plan, trie_regex

# Lines the extractors need even though no signature matches them: each extractor declares its
# own prefilter pattern (extractors.TABLE). Channel lines (" via ") are not among them: there are
# too many; scan.py samples them per file.
TRIGGERS = TRIGGER_PATTERNS


@frozen
class Sig(Frozen):
    """One signature ready for matching a line; its regex is compiled the first time a line
    holds one of its needles (most runs need a few of the ~100)."""

    id: str
    cause: str
    weight: float
    tags: frozenset[str]
    pattern: str
    needles: tuple[str, ...]  # a line matching rx contains at least one of these

    @functools.cached_property
    def rx(self) -> re.Pattern[str]:
        return rxcache.compile(self.pattern)

    def match(self, text: str) -> bool:
        for n in self.needles:
            if n in text:
                return self.rx.search(text) is not None
        return not self.needles and self.rx.search(text) is not None


@frozen
class Rooted(Frozen):
    """One rooted group of the plan: literals that start with the same character. A line is a
    candidate when one of them occurs in it; scan.py finds them with a regex search (its trie,
    compiled on first use) or, where the root character is rare, with bytes.find (memchr) and a
    startswith check, which needs no regex."""

    root: bytes  # one byte
    tails: tuple[bytes, ...]  # each starts with root; none is a prefix of another
    rare: bool  # the plan expects the root character to be rare in the input
    by_next: dict[int, tuple[bytes, ...]]  # the tails by their second byte (all are 2+ bytes)

    @functools.cached_property
    def rx(self) -> re.Pattern[bytes]:
        """The trie of the tails as one regex: matches at a position where a tail starts."""
        root = self.root.decode("latin-1")
        return re.compile((re.escape(root) + trie_regex([t[1:].decode("latin-1") for t in self.tails])
                           ).encode("latin-1"))

    @property
    def compiled(self) -> bool:
        return "rx" in self.__dict__


def _rooted(ch: str, tails: tuple[str, ...], rare: bool) -> Rooted:
    raw = tuple(t.encode() for t in tails)
    by_next: dict[int, list[bytes]] = {}
    for t in raw:
        by_next.setdefault(t[1], []).append(t)
    return Rooted(ch.encode(), raw, rare, {k: tuple(v) for k, v in by_next.items()})


@frozen
class Matcher(Frozen):
    """Which signatures a line can match, whether a harmless pattern can, and which extractors
    (extractors.TABLE) hold a word in it, from one regex over all their needles and words (a
    trie): a handful of C-level searches per line instead of a Python `in` test for each of ~290
    strings. The same answer as testing every one."""

    rx: re.Pattern[str] | None
    # the needle found at a position (the longest there) -> what it and every needle that is a
    # prefix of it stand for: signatures (indexes into Compiled.sigs), whether one belongs to a
    # harmless pattern, extractors (indexes into extractors.TABLE)
    found: dict[str, tuple[frozenset[int], bool, frozenset[int]]]
    always: tuple[int, ...]  # signatures without needles: searched on every line
    harmless_always: bool  # a harmless pattern without needles

    def scan(self, text: str) -> tuple[list[int], bool, list[int]]:
        """The indexes of the signatures that hold a needle in `text` (in order), whether a
        harmless pattern's needle is there too, and the extractors whose word is there."""
        rx, found = self.rx, self.found
        m = rx.search(text) if rx is not None else None
        if m is None:  # most lines
            return list(self.always), self.harmless_always, []
        idx, harmless, ext = set(self.always), self.harmless_always, set()
        while m is not None:  # overlapping: from the next character, not the match's end
            sigs, h, e = found[m.group()]
            idx |= sigs
            ext |= e
            harmless = harmless or h
            m = rx.search(text, m.start() + 1)
        return sorted(idx), harmless, sorted(ext)


def _matcher(sigs: tuple[Sig, ...], harmless: tuple[str, ...] | None,
             words: tuple[tuple[str, ...], ...] = ()) -> Matcher:
    by_needle: dict[str, list[int]] = {}
    for i, sig in enumerate(sigs):
        for n in sig.needles:
            by_needle.setdefault(n, []).append(i)
    by_word: dict[str, list[int]] = {}
    for i, ws in enumerate(words):
        for w in ws:
            by_word.setdefault(w, []).append(i)
    kinder = set(harmless or ())
    every = set(by_needle) | kinder | set(by_word)
    found = {}
    for n in every:
        # the trie finds the longest needle at a position: the shorter ones there are its prefixes
        prefixes = [n[:k] for k in range(1, len(n) + 1) if n[:k] in every]
        found[n] = (frozenset(i for p in prefixes for i in by_needle.get(p, ())),
                    any(p in kinder for p in prefixes),
                    frozenset(i for p in prefixes for i in by_word.get(p, ())))
    rx = rxcache.compile(trie_regex(sorted(every))) if every else None
    return Matcher(rx, found, tuple(i for i, s in enumerate(sigs) if not s.needles), harmless is None)


@frozen
class Compiled(Frozen):
    """Everything a scan needs, built once per knowledge base (and input character mix)."""

    sigs: tuple[Sig, ...]  # scanned on every candidate line
    tail_sigs: tuple[Sig, ...]  # only on the last lines of a file
    harmless_pattern: str | None
    plan: Plan
    finds: tuple[bytes, ...]
    groups: tuple[Rooted, ...]  # the plan's rooted groups (scan.py)
    unanchored: tuple[str, ...]  # signature ids no literal can prefilter: every line is a candidate
    comm_ids_free: bool = True  # no signature or harmless pattern can see a communicator's address
    harmless_patterns: tuple[str, ...] = ()

    @functools.cached_property
    def matcher(self) -> Matcher:
        """The needles of every signature and harmless pattern, and the extractors' words, as one
        regex (built on first use:
        ~6 ms, worth it past a few hundred candidate lines; Collector decides)."""
        needles: list[str] | None = []
        for p in self.harmless_patterns:
            words = _needles(p)
            if not words:
                needles = None
                break
            needles.extend(words)  # type: ignore[union-attr]
        return _matcher(self.sigs, None if needles is None else tuple(needles), tuple(e.words for e in TABLE))

    @functools.cached_property
    def harmless(self) -> re.Pattern[str] | None:
        """Lines that never count as evidence (compiled when the first candidate line comes)."""
        return rxcache.compile(self.harmless_pattern) if self.harmless_pattern else None


def _needles(pattern: str) -> tuple[str, ...]:
    """The longest mandatory run of each alternative (literal_alternatives); () when some
    alternative has none."""
    known = _KNOWN_NEEDLES.get(pattern)
    if known is not None:
        return known
    alts = literal_alternatives(pattern)
    return tuple(sorted({max(runs, key=len) for runs in alts}, key=len, reverse=True)) if alts else ()


def _sig(s: _Row) -> Sig:
    return Sig(s.id, s.cause, float(s.weight), frozenset(s.tags), s.pattern, _needles(s.pattern))


@functools.lru_cache(maxsize=8)
def _compile(key: tuple) -> Compiled:
    sig_rows, harmless_rows, freq = key[:3]
    # the plan travels in the key (kb_key): a scan worker does not redo the set cover
    pl = key[3] if len(key) > 3 else _plan(sig_rows, freq)
    sigs, tail_sigs = [], []
    for row in sig_rows:
        sig = _sig(_Row(*row))
        (tail_sigs if "tail" in sig.tags else sigs).append(sig)
    unanchored = tuple(s.id for s in sigs if not s.needles) + _trigger_unanchored()
    harmless = "|".join(f"(?:{p})" for _i, p in harmless_rows) if harmless_rows else None
    groups = tuple(_rooted(c, tails, c in pl.rare) for c, tails in pl.roots)
    # scan.py blanks `comm 0x...` addresses to find repeated NCCL init lines: only safe when no
    # pattern (a site overlay's) could match on or across them
    every = [p for _i, p, *_r in sig_rows] + [p for _i, p in harmless_rows]
    free = not any("0x" in p or "comm" in p for p in every)
    return Compiled(tuple(sigs), tuple(tail_sigs), harmless, pl,
                    tuple(x.encode() for x in pl.literals), groups, unanchored, free,
                    tuple(p for _i, p in harmless_rows))


@functools.lru_cache(maxsize=1)
def _trigger_items() -> tuple:
    return build_items(TRIGGERS)


def _trigger_unanchored() -> tuple[str, ...]:
    return _KNOWN_TRIGGERS_UNANCHORED[0] if _KNOWN_TRIGGERS_UNANCHORED else _trigger_items()[1]


@functools.lru_cache(maxsize=8)
def _plan(sig_rows: tuple, freq: tuple | None) -> Plan:
    """The prefilter plan for the signatures scanned on every line (not "tail") and TRIGGERS.
    The one for the built-in character estimate (small inputs: most runs) is cached on disk
    (plancache), with every signature's needles: building it parses every pattern (~0.15 s)."""
    if freq is None:
        cached = plancache.load(sig_rows)
        if cached is not None:
            pl, needles, unanchored = cached
            _KNOWN_NEEDLES.update(needles)
            _KNOWN_TRIGGERS_UNANCHORED[:] = [unanchored]
            return pl
    items, _unanchored = build_items([(r[0], r[1]) for r in sig_rows if "tail" not in r[4]])
    pl = plan(items + _trigger_items()[0], freq)
    if freq is None:
        plancache.store(sig_rows, pl, {r[1]: _needles(r[1]) for r in sig_rows}, _trigger_items()[1])
    return pl


# what the plan cache also holds: each signature pattern's needles, and the ids of the TRIGGERS
# no literal prefilters (so a cached run parses no pattern)
_KNOWN_NEEDLES: dict[str, tuple[str, ...]] = {}
_KNOWN_TRIGGERS_UNANCHORED: list[tuple[str, ...]] = []


@frozen
class _Row(Frozen):
    id: str
    pattern: str
    cause: str
    weight: float
    tags: tuple[str, ...]


def kb_key(kb: KnowledgeBase, freq: tuple | None = None) -> tuple:
    """Signature and harmless rows of a knowledge base, the input's character frequencies (None:
    the built-in estimate) and the prefilter plan made from them: hashable and picklable, the key
    of compile_kb's cache (and what scan workers compile from)."""
    rows = tuple((s.id, s.pattern, s.cause, float(s.weight), tuple(s.tags))
                 for s in sorted(kb.signatures.values(), key=lambda s: s.id))
    harmless = tuple((h.id, h.pattern) for h in sorted(kb.harmless.values(), key=lambda h: h.id))
    return rows, harmless, freq, _plan(rows, freq)


def compile_kb(kb: KnowledgeBase, freq: tuple | None = None) -> Compiled:
    """Compile (and cache) the signatures and harmless lines of a knowledge base; `freq` tunes
    the prefilter to the input (prefilter.sample_freq)."""
    return _compile(kb_key(kb, freq))
