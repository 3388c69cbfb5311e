"""Accumulates what the candidate lines say: signature hits, timeouts, crashes, facts per rank."""
from __future__ import annotations

from collections import Counter, defaultdict

from . import extract as x
from .compiled import Compiled, Sig
from .extractors import MAX_HITS, TABLE, TRACEBACK_SPAN
from .records import Exc, FileState, Hit, StoreWait
from .sources import TAIL

TEXT_CAP = 500  # characters of a line kept for display
TAIL_LINES = 3  # "tail" signatures count among this many last non-blank lines of a file
ELASTIC_SPAN = 8  # lines after `rank : N (local_rank: M)` that belong to that rank


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
    def begin(self, name: str) -> FileState:
        self.file = FileState(name, len(self.files), x.file_rank(name))
        self.files.append(self.file)
        if self.file.rank is not None:
            self.seen[self.file.rank].add(name)
        return self.file

    def end(self, tail: bytes, total_lines: int) -> None:
        """Tail analysis: where the file stops (tail signatures) and per-rank progress."""
        f = self.file
        assert f is not None
        text = tail.decode("utf-8", "replace")
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        first = total_lines - len(lines) + 1
        if len(tail) >= TAIL and lines:  # the first line is probably cut
            lines, first = lines[1:], first + 1
        numbered = [(first + i, x.QUOTE.sub("", ln.rstrip("\r"))) for i, ln in enumerate(lines)]
        nonblank = [(n, t) for n, t in numbered if t.strip()]
        for n, t in nonblank[-TAIL_LINES:]:
            if self.comp.harmless is not None and self.comp.harmless.search(t):
                continue
            for sig in self.comp.tail_sigs:
                if sig.match(t):
                    self._record(sig, n, t, self._who(n, t))
        self._progress_tail(numbered)

    # ---------------------------------------------------------------- per candidate line
    def feed(self, line: int, text: str) -> None:
        if text[:1] == ">":  # a quoted paste: the quote marks are not part of the log line
            text = x.QUOTE.sub("", text)
        for part in text.split("\r") if "\r" in text else (text,):
            if part.strip():
                self._line(line, part)

    def _line(self, line: int, text: str) -> None:
        comp = self.comp
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
        w = x.who(text)
        key = w.rank or w.proc or (self.file.rank if self.file else None) or "?"
        self.channels[key].add(x.channel_kind(m))

    def _who(self, line: int, text: str) -> x.Who:
        f = self.file
        assert f is not None
        w = x.who(text)
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
            who = x.Who(m2.group("local"), None, None)
            self.elastic_exits.setdefault(m2.group("local"), (int(m2.group("code")),
                                                             self.hit("x-exit", line, text, who)))

    def _line_rank(self, w: x.Who) -> str | None:
        """A tail line's rank: its own, else its file's; a file of one rank wins over a tag in the text."""
        file_rank = self.file.rank if self.file else None
        return file_rank if w.tag and file_rank is not None else w.rank or file_rank

    def _progress_tail(self, numbered: list[tuple[int, str]]) -> None:
        """Each rank's last step/iteration/batch counter (and losses) in the file's last lines.

        Walks backwards and stops once a stretch of lines brings nothing new, so a file of one
        rank costs a few dozen lines, an interleaved file of many ranks more.
        """
        found: dict[tuple[str, str], tuple[int, int, str, x.Who]] = {}
        seen_phase: set[str] = set()
        quiet = 0
        for n, t in reversed(numbered):
            if quiet > 64 and found:
                break
            quiet += 1
            ts = x.timestamp(t)
            if ts is not None:
                rank = self._line_rank(x.who(t))
                if rank is not None and (rank not in self.last_ts or self.last_ts[rank] < ts):
                    self.last_ts[rank] = ts
            ph = x.phase(t)
            if ph is not None:
                w = x.who(t)
                rank = self._line_rank(w)
                if rank is not None and rank not in seen_phase:
                    seen_phase.add(rank)
                    self.phases.setdefault(rank, (ph, self.hit("x-phase", n, t, x.Who(rank, w.proc, w.host))))
            low = t.lower()
            if "step" not in low and "iter" not in low and "batch" not in low:
                continue
            m = x.PROGRESS.search(t)
            if not m or ("Error" in t or "Exception" in t) and x.exception(t) is not None:
                continue  # an exception's message ("bad batch at step 5") is not progress
            if self.file is not None:
                self.file_progress.setdefault(self.file.name, n)
            w = x.who(t)
            rank = self._line_rank(w)
            if rank is None:
                continue
            kind = m.group("kind").lower()
            kind = "iteration" if kind == "iter" else kind
            num = int(m.group("n"))
            loss = x.LOSS.search(t)
            if loss:
                self.losses[(kind, num)].setdefault(rank, loss.group("v"))
            self.last_step_line.setdefault((rank, self.file.name if self.file else ""), n)
            if (rank, kind) not in found:
                found[(rank, kind)] = (num, n, t, x.Who(rank, w.proc, w.host))
                quiet = 0
        for (rank, kind), (num, n, t, who) in found.items():
            if kind not in self.progress[rank]:
                self.progress[rank][kind] = (num, self.hit("x-progress", n, t, who))


def _int(s: str | None) -> int | None:
    return int(s) if s is not None else None
