"""Accumulates what the candidate lines say: signature hits, timeouts, crashes, facts per rank."""
from __future__ import annotations

import functools
import re
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterator
from itertools import accumulate

from ..lazyre import lazy
from . import extract as x
from .compiled import Compiled, Sig
from .extractors import MAX_HITS, TABLE, TRACEBACK_SPAN
from .prefilter import literal_alternatives
from .records import Exc, FileState, Hit, StoreWait
from .sources import TAIL

TEXT_CAP = 500  # characters of a line kept for display
TAIL_LINES = 3  # "tail" signatures count among this many last non-blank lines of a file
ELASTIC_SPAN = 8  # lines after `rank : N (local_rank: M)` that belong to that rank
# Candidate lines fed before the needles are matched with one regex (Compiled.matcher): building
# it costs what testing each needle in ~400 lines does, and a small run feeds fewer.
MATCHER_AFTER = 400
_fed = [0]  # candidate lines fed in this process (the same answer either way: only the cost differs)


class Collector:
    """Feeds on candidate lines file by file; score.py turns the result into causes."""

    def __init__(self, comp: Compiled) -> None:
        self.comp = comp
        self.hits: dict[str, list[Hit]] = defaultdict(list)
        self.counts: Counter[str] = Counter()
        self.timeouts: dict[tuple[str, str], x.Timeout] = {}  # (rank or proc, pg) -> first timeout
        self.unranked_timeouts: list[x.Timeout] = []
        self.work_status: dict[str, tuple[int, int]] = {}
        self.facts: dict[str, dict[str, str]] = defaultdict(dict)  # rank/proc -> fact -> value
        self.fact_lines: dict[tuple[str, str], Hit] = {}
        self.channels: dict[str, set[str]] = defaultdict(set)
        self.proc_rank: dict[str, tuple[int, str]] = {}  # proc -> (nranks, rank)
        self.world: int = 0
        self.worlds: dict[str, int] = {}  # rank -> the world size its own lines give
        self.nodes: int = 0
        self.hosts: set[str] = set()
        self.gpus: dict[str, list[Hit]] = defaultdict(list)  # GPU model -> the lines naming it
        self.rank_hosts: dict[str, str] = {}  # rank -> host, from a listing of the whole world
        self.seen: dict[str, set[str]] = defaultdict(set)  # rank/proc -> files
        self.elastic_exits: dict[str, tuple[int, Hit]] = {}
        self.announce: dict[str, list[Hit]] = defaultdict(list)
        self.ops: dict[str, list[Hit]] = defaultdict(list)
        self.progress: dict[str, dict[str, tuple[int, Hit]]] = defaultdict(dict)
        self.losses: dict[tuple[str, int], dict[str, str]] = defaultdict(dict)
        self.resume: dict[str, tuple[tuple[int | None, int | None], Hit]] = {}  # rank -> (epoch, step)
        self.exceptions: list[Exc] = []
        self.phases: dict[str, tuple[str, Hit]] = {}  # rank -> its last phase word and line
        self.last_ts: dict[str, tuple[int, float]] = {}  # rank -> its last timestamp in a file's tail
        self.last_step_line: dict[tuple[str, str], int] = {}  # (rank, file) -> its last progress line there
        self.file_progress: dict[str, int] = {}  # file -> line of its last progress line
        self.sample_ids: dict[str, dict[str, Hit]] = defaultdict(dict)  # id list -> rank -> line
        self.epoch_sizes: dict[str, tuple[int, Hit]] = {}  # rank -> its first "N batches" line
        self.named_late: dict[str, Hit] = {}  # rank a waiter names as not arriving -> that line
        self.store_waits: list[StoreWait] = []  # store waits that gave up, in reading order
        self.files: list[FileState] = []
        self.file: FileState | None = None
        self._channel_memo: set[tuple[str, str]] = set()

    # ---------------------------------------------------------------- per file
    def begin(self, name: str, local_map: dict[str, str] | None = None) -> FileState:
        self.file = FileState(name, len(self.files), x.file_rank(name), local_map=local_map or {})
        self.files.append(self.file)
        if self.file.rank is not None:
            self.seen[self.file.rank].add(name)
        return self.file

    def end(self, tail: bytes, total_lines: int) -> None:
        """Tail analysis: where the file stops (tail signatures) and per-rank progress."""
        f = self.file
        assert f is not None
        lines = tail.decode("utf-8", "replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        first = total_lines - len(lines) + 1
        if len(tail) >= TAIL and lines:  # the first line is probably cut
            lines, first = lines[1:], first + 1
        texts = [ln.rstrip("\r") for ln in lines] if b"\r" in tail else lines
        if tail[:1] == b">" or b"\n>" in tail:  # a quoted paste: QUOTE strips a leading ">" only
            texts = [x.QUOTE.sub("", t) if t[:1] == ">" else t for t in texts]
        last: list[tuple[int, str]] = []
        for i in range(len(texts) - 1, -1, -1):
            if len(last) == TAIL_LINES:
                break
            if texts[i].strip():
                last.append((first + i, texts[i]))
        for n, t in reversed(last):
            if self.comp.harmless is not None and self.comp.harmless.search(t):
                continue
            for sig in self.comp.tail_sigs:
                if sig.match(t):
                    self._record(sig, n, t, self._who(n, t))
        self._progress_tail(texts, first)

    # ---------------------------------------------------------------- per candidate line
    def feed(self, line: int, text: str) -> None:
        if text[:1] == ">":  # a quoted paste: the quote marks are not part of the log line
            text = x.QUOTE.sub("", text)
        for part in text.split("\r") if "\r" in text else (text,):
            if part.strip():
                self._line(line, part)

    def _line(self, line: int, text: str) -> None:
        comp = self.comp
        _fed[0] += 1
        if _fed[0] > MATCHER_AFTER:
            idx, harmless, ext = comp.matcher.scan(text)
            if harmless and comp.harmless is not None and comp.harmless.search(text):
                return
            who = self._who(line, text)
            sigs = comp.sigs
            for i in idx:
                sig = sigs[i]
                if sig.rx.search(text) is not None:
                    self._record(sig, line, text, who)
            key = who.rank or who.proc or "?"
            for i in ext:  # as _extract does, from the words the matcher saw
                TABLE[i].handle(self, line, text, who, key)
            return
        if comp.harmless is not None and comp.harmless.search(text):
            return
        who = self._who(line, text)
        for sig in comp.sigs:
            for needle in sig.needles:
                if needle in text:
                    if sig.rx.search(text) is not None:
                        self._record(sig, line, text, who)
                    break
            else:
                if not sig.needles and sig.rx.search(text) is not None:
                    self._record(sig, line, text, who)
        self._extract(line, text, who)

    def channel(self, text: str) -> None:
        """A line found only for its transport (`... via P2P/IPC`): record that and nothing else."""
        m = x.CHANNEL.search(text)
        if m is None:
            return
        # the same process prints the same transport on dozens of channels: decide once
        cut = text.find(" NCCL")
        memo = (text[:cut] if cut > 0 else text[:40], text[m.start():m.end()])
        if memo in self._channel_memo:
            return
        self._channel_memo.add(memo)
        w = self._global(x.who(text))
        key = w.rank or w.proc or (self.file.rank if self.file else None) or "?"
        self.channels[key].add(x.channel_kind(m))

    def _who(self, line: int, text: str) -> x.Who:
        f = self.file
        assert f is not None
        w = self._global(x.who(text))
        rank = w.rank if not (w.tag and f.rank is not None) else None  # a file of one rank wins over a tag
        if rank is None and f.elastic_rank is not None and line - f.elastic_line <= ELASTIC_SPAN:
            rank = f.elastic_rank
        if rank is None and w.proc is None:
            rank = f.rank
        elif rank is None and f.rank is not None and w.proc not in self.proc_rank:
            # a file of one rank: its NCCL process is that rank unless an init line says otherwise
            self.proc_rank[w.proc] = (0, f.rank)
        if w.host:
            self.hosts.add(w.host)
        key = rank or w.proc
        if key is not None:
            self.seen[key].add(f.name)
        return x.Who(rank, w.proc, w.host)

    def _global(self, w: x.Who) -> x.Who:
        """A rank read from torchrun's local prefix, as the global rank this file's summary gives it."""
        mapped = self.file.local_map.get(w.rank or "") if w.local and self.file is not None else None
        return w if mapped is None else x.Who(mapped, w.proc, w.host, w.tag)

    def hit(self, sig_id: str, line: int, text: str, who: x.Who) -> Hit:
        f = self.file
        assert f is not None
        shown = text.strip()
        if len(shown) > TEXT_CAP:
            shown = shown[:TEXT_CAP] + " [...]"
        return Hit(sig_id, f.name, line, shown, who.rank, who.proc, x.timestamp(text), (f.index, line))

    def _record(self, sig: Sig, line: int, text: str, who: x.Who) -> None:
        self.counts[sig.id] += 1
        kept = self.hits[sig.id]
        if len(kept) < MAX_HITS:
            kept.append(self.hit(sig.id, line, text, who))
        if "end" in sig.tags and self.file is not None:
            self.file.ends.append(line)
        if "resume" in sig.tags:
            self.resumed(line, text, who)

    def resumed(self, line: int, text: str, who: x.Who) -> None:
        """A rank's first announcement of where it resumed (epoch, step)."""
        if who.rank is not None and who.rank not in self.resume:
            point = x.resume_point(text)
            if point is not None:
                self.resume[who.rank] = (point, self.hit("x-resume", line, text, who))

    # ---------------------------------------------------------------- extractors
    def _extract(self, line: int, text: str, who: x.Who) -> None:
        """Every extractor of the table (extractors.TABLE) whose word is in the line, in order."""
        key = who.rank or who.proc or "?"
        for e in TABLE:
            for word in e.words:
                if word in text:
                    e.handle(self, line, text, who, key)
                    break

    def spawn(self, line: int, text: str, who: x.Who) -> None:
        f = self.file
        assert f is not None
        m = x.SPAWN_ERROR.search(text)
        if m:
            f.spawned = (m.group("i"), line)
            return
        m2 = x.SPAWN_EXIT.search(text)
        if m2:
            code = int(m2.group("code")) if m2.group("code") else x.SIGNAL_CODES.get(m2.group("sig"), -1)
            i = m2.group("i")
            self.seen[i].add(f.name)
            self.elastic_exits.setdefault(i, (code, self.hit("x-exit", line, text, x.Who(i, None, None))))

    def exception(self, line: int, text: str, who: x.Who, key: str) -> None:
        f = self.file
        assert f is not None
        exc = x.exception(text)
        if exc is None or len(self.exceptions) >= MAX_HITS * 4:
            return
        kind, msg = exc
        if who.rank is None and f.spawned and 0 < line - f.spawned[1] <= TRACEBACK_SPAN \
                and kind not in x.LAUNCHER_EXC:
            who = x.Who(f.spawned[0], who.proc, who.host)
            self.seen[f.spawned[0]].add(f.name)
        after = f.tracebacks.get(key)
        if after is None and f.tracebacks:
            after = max(f.tracebacks.values())  # unprefixed frames of a prefixed header
        tb = after is not None and line - after <= TRACEBACK_SPAN
        if f.logged_open is not None and tb:
            if f.logged and f.logged[-1][0] == f.logged_open:
                f.logged.pop()  # the chain goes on: one span from its first header
            f.logged.append((f.logged_open, line))
            f.logged_open = None
        frame = ""
        if tb:  # the innermost frame of the user's own code since that traceback's header
            seen = f.user_frame.get(key) or f.user_frame.get("?")
            if seen is not None and after is not None and seen[1] > after:
                frame = seen[0]
        self.exceptions.append(Exc(kind, msg, self.hit("x-exception", line, text, who),
                                   bool(x.PEER_LOSS.search(msg)), kind in x.LAUNCHER_EXC, tb, frame))

    def timeout(self, line: int, text: str, who: x.Who) -> None:
        f = self.file
        assert f is not None
        m = x.WORK.search(text)
        pg = x.PG.search(text)
        t = x.Timeout(_int(m.group("seq")) if m else None, m.group("op") if m else None,
                      pg.group("pg") if pg else "0", f.name, line, text.strip()[:TEXT_CAP], x.timestamp(text))
        if f.first_timeout is None:
            f.first_timeout = line
        key = who.rank or who.proc
        if key is None:
            self.unranked_timeouts.append(t)
        else:
            self.timeouts.setdefault((key, t.pg), t)
        if m is None:
            f.pending_watchdog = (key or "", line)

    def fact(self, key: str, fact: str, value: str, line: int, text: str, who: x.Who) -> None:
        if fact not in self.facts[key]:
            self.facts[key][fact] = value
            self.fact_lines[(key, fact)] = self.hit("x-fact", line, text, who)

    def elastic(self, line: int, text: str) -> None:
        f = self.file
        assert f is not None
        m = x.ELASTIC_RANK.search(text)
        if m:
            f.elastic_rank, f.elastic_line = m.group("rank"), line
            return
        m2 = x.ELASTIC_ONE_LINE.search(text)
        if m2:
            r = f.local_map.get(m2.group("local"), m2.group("local"))  # the agent names local ranks
            who = x.Who(r, None, None)
            self.elastic_exits.setdefault(r, (int(m2.group("code")), self.hit("x-exit", line, text, who)))

    def _line_rank(self, w: x.Who) -> str | None:
        """A tail line's rank: its own, else its file's; a file of one rank wins over a tag in the text."""
        file_rank = self.file.rank if self.file else None
        return file_rank if w.tag and file_rank is not None else w.rank or file_rank

    def _progress_tail(self, texts: list[str], first: int) -> None:
        """Each rank's last step/iteration/batch counter (and losses), last timestamp and last
        phase in the file's last lines (texts[i] is line first + i).

        Walks backwards and stops once a stretch of lines brings nothing new, so a file of one
        rank costs a few dozen lines, an interleaved file of many ranks more. The lines that can
        hold a counter, a timestamp or a phase are found for the whole stretch at once
        (TailGates): the per-line extractors run on those only.
        """
        gates = TailGates(texts)
        whos: dict[int, x.Who] = {}

        def who(i: int) -> x.Who:
            w = whos.get(i)
            if w is None:
                w = whos[i] = self._global(x.who(texts[i]))
            return w

        found: dict[tuple[str, str], tuple[int, int, str, x.Who]] = {}
        quiet = 0
        start = len(texts)
        name = self.file.name if self.file else ""
        for i in gates.progress():
            # the walk: every line from the end counts towards `quiet`; only a counter resets it
            while start > i:
                if quiet > 64 and found:
                    break
                quiet += 1
                start -= 1
            if start > i:
                break
            t, n = texts[i], first + i
            m = x.PROGRESS.search(t)
            if not m or ("Error" in t or "Exception" in t) and x.exception(t) is not None:
                continue  # an exception's message ("bad batch at step 5") is not progress
            if self.file is not None:
                self.file_progress.setdefault(name, n)
            w = who(i)
            rank = self._line_rank(w)
            if rank is None:
                continue
            kind = m.group("kind").lower()
            kind = "iteration" if kind == "iter" else kind
            num = int(m.group("n"))
            loss = x.LOSS.search(t)
            if loss:
                self.losses[(kind, num)].setdefault(rank, loss.group("v"))
            self.last_step_line.setdefault((rank, name), n)
            if (rank, kind) not in found:
                found[(rank, kind)] = (num, n, t, x.Who(rank, w.proc, w.host))
                quiet = 0
        while start > 0 and not (quiet > 64 and found):
            quiet += 1
            start -= 1
        seen_phase: set[str] = set()
        for i, clock, worded in gates.stamped(start):
            t = texts[i]
            if clock:
                ts = x.timestamp(t)
                if ts is not None:
                    rank = self._line_rank(who(i))
                    if rank is not None and (rank not in self.last_ts or self.last_ts[rank] < ts):
                        self.last_ts[rank] = ts
            ph = x.phase(t) if worded else None
            if ph is not None:
                w = who(i)
                rank = self._line_rank(w)
                if rank is not None and rank not in seen_phase:
                    seen_phase.add(rank)
                    self.phases.setdefault(rank, (ph, self.hit("x-phase", first + i, t,
                                                               x.Who(rank, w.proc, w.host))))
        for (rank, kind), (num, n, t, who_) in found.items():
            if kind not in self.progress[rank]:
                self.progress[rank][kind] = (num, self.hit("x-progress", n, t, who_))


# Every timestamp extract.timestamp reads (ISO dates, glog headers) holds a clock time hh:mm:ss.
_CLOCK = lazy(r":\d\d:")
PROGRESS_WORDS = ("step", "iter", "batch")  # a progress counter's line holds one (lower-cased)


@functools.lru_cache(maxsize=1)
def phase_needles() -> tuple[str, ...] | None:
    """Lower-cased words one of which every ASCII line a phase pattern (extract.PHASES) matches
    holds, none inside another; None when some pattern has no such word."""
    out: set[str] = set()
    for _name, rx in x.PHASES:
        alts = literal_alternatives(rx.pattern)
        if alts is None or rx.flags & ~(re.IGNORECASE | re.UNICODE):
            return None
        for runs in alts:
            word = max(runs, key=len)
            if not word.isascii():  # re.I folds some non-ASCII letters to ASCII ones (K, ſ)
                return None
            out.add(word.lower())
    return tuple(sorted(n for n in out if not any(o != n and o in n for o in out)))


class TailGates:
    """Which of a file's last lines can hold a progress counter, a timestamp or a phase word,
    found for the whole stretch at once with str.find and one regex (a handful of C calls
    instead of several Python-level searches per line). A superset: the extractors decide.
    Text that is not ASCII gets every line (lower() may change its length)."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.block = "\n".join(texts)
        self.starts = list(accumulate(map((1).__add__, map(len, texts)), initial=0))  # no Python frame a line
        self.low = self.block.lower() if self.block.isascii() else None

    def _found(self, hay: str, word: str, pos: int, out: set[int]) -> None:
        """Indexes of the lines from offset `pos` on that hold `word`."""
        starts = self.starts
        pos = hay.find(word, pos)
        while pos >= 0:
            i = bisect_right(starts, pos) - 1
            out.add(i)
            pos = hay.find(word, starts[i + 1])

    def progress(self) -> Iterator[int]:
        """Lines whose lower-cased text holds a progress word, last first (found backwards, as
        the walk needs them: it stops after a few dozen lines)."""
        texts = self.texts
        if self.low is None:
            yield from (i for i in range(len(texts) - 1, -1, -1)
                        if any(w in texts[i].lower() for w in PROGRESS_WORDS))
            return
        low, starts = self.low, self.starts
        last = [low.rfind(w) for w in PROGRESS_WORDS]
        while True:
            pos = max(last)
            if pos < 0:
                return
            i = bisect_right(starts, pos) - 1
            yield i
            cut = starts[i]
            last = [p if p < cut else low.rfind(w, 0, cut) for w, p in zip(PROGRESS_WORDS, last)]

    def stamped(self, start: int) -> Iterator[tuple[int, bool, bool]]:
        """(line, may hold a timestamp, may hold a phase) from `start` on, last first, for the
        lines where either may."""
        pos = self.starts[start]
        clock: set[int] = set()
        starts = self.starts
        for m in _CLOCK.finditer(self.block, pos):
            clock.add(bisect_right(starts, m.start()) - 1)
        needles = phase_needles()
        if self.low is None or needles is None:
            worded = set(range(start, len(self.texts)))
        else:
            worded = set()
            for word in needles:
                self._found(self.low, word, pos, worded)
        for i in sorted(clock | worded, reverse=True):
            yield i, i in clock, i in worded


def _int(s: str | None) -> int | None:
    return int(s) if s is not None else None
