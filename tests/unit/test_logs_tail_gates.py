"""The tail walk (Collector.end) finds its counter, timestamp and phase lines for the whole
stretch at once (collect.TailGates) instead of running every extractor on every line (issue 25,
item 15). These tests hold it to the line-by-line walk it replaced, on seeded tails that mix
ranks, formats, quoted pastes, carriage returns and non-ASCII text."""
from __future__ import annotations

import random

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.logs import extract as x
from distdoctor.knowledge.logs.collect import Collector, TailGates, phase_needles
from distdoctor.knowledge.logs.compiled import compile_kb
from distdoctor.knowledge.logs.sources import TAIL

COMP = compile_kb(load_knowledge(use_env=False))


class LineByLine(Collector):
    """The walk as it was: every extractor on every line, from the last line backwards."""

    def end(self, tail: bytes, total_lines: int) -> None:
        lines = tail.decode("utf-8", "replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        first = total_lines - len(lines) + 1
        if len(tail) >= TAIL and lines:
            lines, first = lines[1:], first + 1
        numbered = [(first + i, x.QUOTE.sub("", ln.rstrip("\r"))) for i, ln in enumerate(lines)]
        nonblank = [(n, t) for n, t in numbered if t.strip()]
        for n, t in nonblank[-3:]:
            if self.comp.harmless is not None and self.comp.harmless.search(t):
                continue
            for sig in self.comp.tail_sigs:
                if sig.match(t):
                    self._record(sig, n, t, self._who(n, t))
        found: dict = {}
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
                continue
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


def _line(rng: random.Random) -> str:
    r = rng.randrange(6)
    pre = rng.choice(["", f"[rank{r}]:", f"{r}: ", "> ", ">> [rank1]:", f"[default{r}]:", "  "])
    ts = rng.choice(["", "2026-12-02 11:02:27,475 ", f"E1202 12:00:{rng.randrange(60):02d}.123456 1234 t.py:12] ",
                     "Dec 02 11:02:24.238283 ", "[2026-12-02T11:02:27Z] ", "12:00:0", "x 11:22:33 y "])
    body = rng.choice([
        f"step: {rng.randrange(900)}  loss: {rng.random() * 3:.4f}", f"Iter {rng.randrange(50)} loss={rng.random():.5f}",
        f"BATCH #{rng.randrange(9)}", f"node{r}:4{r}:4{r} [{r}] NCCL INFO AllReduce: opCount 5 comm 0x55",
        f"node{r}:4{r}:4{r} [{r}] NCCL INFO Init COMPLETE", "Saving checkpoint to /ck", "running EVALUATION",
        "validating shard 3", "destroy_process_group()", "resuming from step 40", "DataLoader worker 2",
        "RuntimeError: bad batch at step 5", "Training completed", "İteration 3 ſtep 4 K", "stęp 9 évaluation",
        "train.py: rank=3 step 7", "global_rank: 2 batch 11", "tcpstore wait", "\r", "", "caf\u00e9 model state"])
    line = pre + ts + body
    if rng.random() < 0.1:
        line += "\r"
    return line


@pytest.mark.parametrize("seed", range(60))
def test_tail_walk_matches_the_line_by_line_walk(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([3, 40, 150, 400])
    ascii_only = seed % 3 == 0
    lines = [_line(rng) for _ in range(n)]
    if ascii_only:
        lines = [ln.encode("ascii", "replace").decode() for ln in lines]
    tail = ("\n".join(lines) + ("\n" if seed % 2 else "")).encode()[-TAIL:]
    got, want = Collector(COMP), LineByLine(COMP)
    for col in (got, want):
        for f in range(2):  # a second file: phases and steps already seen stay first
            col.begin(f"/logs/rank{seed % 4 if f == 0 else 'x'}.log")
            col.end(tail, 1000 + n)
    for field in ("last_ts", "phases", "progress", "losses", "last_step_line", "file_progress", "counts", "hits"):
        assert getattr(got, field) == getattr(want, field), field
        assert list(getattr(got, field)) == list(getattr(want, field)), field  # the same order


def test_gates_find_every_line_the_extractors_would() -> None:
    rng = random.Random(5)
    texts = [_line(rng).encode("ascii", "replace").decode() for _ in range(300)]
    g = TailGates(texts)
    assert g.low is not None
    stamped = {i: (c, w) for i, c, w in g.stamped(0)}
    progress = set(g.progress())
    for i, t in enumerate(texts):
        if x.timestamp(t) is not None:
            assert stamped[i][0], t
        if x.phase(t) is not None:
            assert stamped[i][1], t
        assert (i in progress) == any(w in t.lower() for w in ("step", "iter", "batch")), t
    assert phase_needles(), "every phase pattern has a word to find"
