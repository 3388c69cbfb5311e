"""Whether a job is making progress, judged from cheap samples fed in by the watcher (pure: the
times are given, so tests replay any story).

A rank progressed when its own log grew, when its collective threads (Gloo's work loops, NCCL's
socket proxies) read or wrote bytes, or when its main thread's stack (its Python frames and their
lines) changed between two samples; the job's shared output growing counts for the job. Stacks are
sampled in rounds (every rank at once); a rank busy on the same line, sample after sample, has not
progressed. CPU time says whether a rank is computing or waiting (the live table's state). A hang is confirmed when
no rank progressed for the stall window. Stack samples taken together (a round) also measure
stragglers: a rank found outside the collectives while the others wait in one."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from ..stacks.classify import classify
from ..stacks.frames import python_frames

BUSY_FRACTION = 0.01  # of one core, over a sampling period: below it a rank is idle (waiting)
MIN_ROUNDS = 6  # rounds of stack samples before a straggler can be named
STRAGGLER_SLOWDOWN = 1.2
# the rows' states
TRAINING, IN_COLLECTIVE, STUCK, WAITING, DEAD, STARTING, DONE = (
    "training", "in a collective", "stuck in a frame", "waiting", "dead", "starting", "exited")


def stack_key(frames: list[dict[str, Any]]) -> tuple[tuple[str, str, int], ...]:
    """The Python frames of a stack with their lines, innermost first. Lines count: a training
    loop written at module level shows one function (`<module>`) in every sample, its compute
    and its collectives told apart only by the line; a rank stuck in a C call or a one-line loop
    keeps its line. (A busy loop over several lines reads as progress: a missed hang, never a
    healthy job ended.)"""
    return tuple((str(f.get("name")), str(f.get("file")), int(f.get("line") or 0)) for f in python_frames(frames))


@dataclass
class RankView:
    """One row of the live table."""

    rank: str
    pid: int | None
    host: str
    state: str
    where: str
    last_collective: str
    since_progress_s: float
    cpu_pct: float
    exit_code: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "pid": self.pid, "host": self.host, "state": self.state,
                "where": self.where, "last_collective": self.last_collective,
                "since_progress_s": round(self.since_progress_s, 1), "cpu_pct": round(self.cpu_pct, 1),
                "exit_code": self.exit_code}


@dataclass
class _Rank:
    rank: str
    pid: int
    host: str
    seen_at: float
    last_progress: float
    cpu_s: float | None = None
    cpu_at: float = 0.0
    cpu_pct: float = 0.0
    busy_since_stack: float = 0.0  # CPU seconds used since the last stack sample
    log_size: int = -1
    io: int | None = None  # bytes its collective threads moved so far
    proc_io: int | None = None  # bytes the whole process read and wrote so far
    key: tuple | None = None
    unchanged: bool = False  # the last round found it where the round before did
    native_key: tuple | None = None
    same_since: float | None = None  # first sample of the current unchanged stack
    where: str = ""
    waiting: bool = False
    last_collective: str = ""
    exit_code: int | None = None
    dead_at: float | None = None
    samples: list[bool] = field(default_factory=list)  # per round: outside any collective


class Progress:
    """The job's progress as samples come in; `stalled(now)` says when a hang is confirmed."""

    def __init__(self, stall_s: float, start: float, host: str = "") -> None:
        self.stall_s = stall_s
        self.start = start
        self.host = host
        self.job_progress = start  # the shared output's last growth
        self.ranks: dict[str, _Rank] = {}
        self.shared_size = -1
        self.rounds = 0
        self.last_round = start
        self.round_log: list[dict[str, bool]] = []  # per round: rank -> outside any collective

    # --- samples ------------------------------------------------------------------------------
    def add_rank(self, rank: str, pid: int, now: float, host: str = "") -> None:
        known = self.ranks.get(rank)
        if known is None or known.pid != pid:  # a new rank, or an elastic restart's new process
            self.ranks[rank] = _Rank(rank, pid, host or self.host, now, now)

    def cpu(self, rank: str, now: float, cpu_s: float | None) -> None:
        """The rank's CPU seconds so far (None: gone)."""
        r = self.ranks[rank]
        if cpu_s is None:
            return
        if r.cpu_s is not None and now > r.cpu_at:
            used = max(0.0, cpu_s - r.cpu_s)
            r.cpu_pct = 100.0 * used / (now - r.cpu_at)
            r.busy_since_stack += used
        r.cpu_s, r.cpu_at = cpu_s, now

    def log_size(self, rank: str | None, now: float, size: int) -> None:
        """The size of a rank's own log files (rank None: the job's shared output)."""
        if rank is None:
            if size > self.shared_size >= 0:
                self.job_progress = now
            self.shared_size = max(self.shared_size, size)
            return
        r = self.ranks.get(rank)
        if r is None:
            return
        if size > r.log_size >= 0:
            r.last_progress = now
        r.log_size = max(r.log_size, size)

    def collective_io(self, rank: str, now: float, total: int | None) -> None:
        """Bytes the rank's collective threads (Gloo's, NCCL's socket proxies) moved so far:
        growth is collectives completing, progress even when every stack looks the same (a
        straggler's peers wait in all_reduce in most samples, yet their all_reduces finish)."""
        r = self.ranks.get(rank)
        if r is None or total is None:
            return
        if r.io is not None and total > r.io:
            r.last_progress = now
        r.io = total

    def process_io(self, rank: str, now: float, total: int | None) -> None:
        """Bytes the whole process read and wrote: progress for a rank last seen outside the
        collectives (rank 0 saving a checkpoint in one long call, a loader reading), never for
        one waiting in a collective, whose other threads (a metrics pusher) may talk on."""
        r = self.ranks.get(rank)
        if r is None or total is None:
            return
        if r.proc_io is not None and total > r.proc_io and r.key is not None and not r.waiting:
            r.last_progress = now
        r.proc_io = total

    def wants_stacks(self, now: float, every: float) -> bool:
        """Whether a round of stack samples is due: every `every` seconds while the job's progress
        is in doubt (nothing moved for that long), every 2 x `every` otherwise (the rounds that
        measure stragglers). Idle ranks are sampled too: a healthy job that sleeps between its
        collectives uses almost no CPU, and only its stacks moving shows it is alive."""
        if not self.alive():
            return False
        since = now - self.last_round
        return since >= 2 * every or (since >= every and now - self.last_progress() >= every)

    def stacks(self, now: float, frames_by_rank: Mapping[str, list[dict[str, Any]]]) -> None:
        """A round: each alive rank's main-thread frames (a rank missing here was not dumped)."""
        self.last_round = now
        counted = False
        this_round: dict[str, bool] = {}
        for rank, frames in frames_by_rank.items():
            r = self.ranks.get(rank)
            if r is None or r.dead_at is not None or not frames:
                continue
            place = classify(frames)
            key = stack_key(frames)
            r.unchanged = r.key is not None and key == r.key
            if r.key is not None and key != r.key:
                r.last_progress = now
                r.same_since = now
            elif r.key is None:
                r.same_since = now
            r.key, r.where, r.waiting = key, place.where, place.waiting
            if place.waiting:
                r.last_collective = place.where
            r.busy_since_stack = 0.0
            r.samples.append(not place.waiting)
            this_round[rank] = not place.waiting
            counted = True
        if counted:
            self.rounds += 1
            self.round_log.append(this_round)
            del self.round_log[:-4096]
        for r in self.alive():
            r.busy_since_stack = 0.0

    def needs_native(self, now: float, every: float) -> list[str]:
        """Ranks computing (a tenth of a core or more) outside the collectives on the same Python
        line as the round before, with no other sign of progress for `every` seconds: only their
        native frames can tell work (a matmul, then a tanh) from a spin."""
        return [r.rank for r in self.alive() if r.unchanged and not r.waiting and r.cpu_pct >= 10.0
                and now - max(r.last_progress, self.job_progress) >= every]

    def native(self, rank: str, now: float, frames: list[dict[str, Any]]) -> None:
        """A native dump of such a rank: its main thread inside named native code (a matmul,
        a tanh kernel, a BLAS or OpenMP routine) is computing; no named native frame under its
        Python line (a loop in Python itself, a spin in stripped libc code) is not. Comparing two
        dumps instead would miss work that sits in one kernel at both instants."""
        r = self.ranks.get(rank)
        if r is None:
            return
        key = tuple(str(f.get("name")) for f in frames
                    if f.get("native") and not str(f.get("name", "")).startswith("0x"))
        if key:
            r.last_progress = now
            r.native_key = key

    def died(self, rank: str, now: float, exit_code: int | None) -> None:
        r = self.ranks.get(rank)
        if r is not None and r.dead_at is None:
            r.dead_at, r.exit_code = now, exit_code

    # --- judgement ----------------------------------------------------------------------------
    def alive(self) -> list[_Rank]:
        return [r for r in self.ranks.values() if r.dead_at is None]

    def last_progress(self) -> float:
        """When anything of the job last moved."""
        return max([self.job_progress] + [r.last_progress for r in self.ranks.values()])

    def stalled(self, now: float) -> bool:
        """No rank progressed for the stall window (and every rank has been seen that long)."""
        alive = self.alive()
        if not alive:
            return False
        return now - self.last_progress() >= self.stall_s

    def failed_ranks(self) -> list[str]:
        """Ranks that died with a failure (an exit code other than 0, or a signal), first first.
        A rank whose status was gone before it could be read (reaped at once) is not one: the
        launcher's exit code or the logs tell."""
        dead = [r for r in self.ranks.values() if r.dead_at is not None and r.exit_code not in (0, None)]
        return [r.rank for r in sorted(dead, key=lambda r: r.dead_at or 0.0)]

    def rows(self, now: float) -> list[RankView]:
        out = []
        for r in sorted(self.ranks.values(), key=lambda r: (not r.rank.isdigit(), int(r.rank) if r.rank.isdigit() else 0, r.rank)):
            if r.dead_at is not None:
                state = DONE if r.exit_code == 0 else DEAD
            elif r.key is None:
                state = STARTING if now - r.seen_at < self.stall_s else WAITING
            elif now - r.last_progress >= self.stall_s and r.cpu_pct >= 100 * BUSY_FRACTION and not r.waiting:
                state = STUCK
            elif r.waiting:
                state = IN_COLLECTIVE
            elif r.cpu_pct < 100 * BUSY_FRACTION and now - r.last_progress >= self.stall_s:
                state = WAITING
            else:
                state = TRAINING
            out.append(RankView(r.rank, r.pid, r.host, state, r.where, r.last_collective,
                                max(0.0, now - max(r.last_progress, self.job_progress)), r.cpu_pct, r.exit_code))
        return out

    def stragglers(self) -> list[dict[str, Any]]:
        """[{"rank", "slowdown"}]: a rank the others wait for in most rounds (it is outside the
        collectives while every other rank waits in one); slowdown is its share of rounds
        outside the collectives over the others' median share (how much longer its part of a
        step takes; null when the others waited in every round)."""
        ranks = [r for r in self.ranks.values() if len(r.samples) >= MIN_ROUNDS]
        if len(ranks) < 2:
            return []
        busy = {r.rank: sum(r.samples) / len(r.samples) for r in ranks}
        out = []
        for r in ranks:
            full = [rnd for rnd in self.round_log if r.rank in rnd and len(rnd) > 1]
            waited_for = sum(1 for rnd in full if rnd[r.rank] and not any(
                v for k, v in rnd.items() if k != r.rank)) / max(1, len(full))
            others = [busy[o.rank] for o in ranks if o.rank != r.rank]
            base = median(others)
            if base <= 0:
                # the others were in a collective at every sample: waiting on this rank
                slow = float("inf") if busy[r.rank] >= 0.5 else 0.0
            else:
                slow = busy[r.rank] / base
            if slow >= STRAGGLER_SLOWDOWN and waited_for >= 0.5:
                out.append({"rank": r.rank, "slowdown": None if slow == float("inf") else round(slow, 2)})
        # only the clear one: when every rank is "slow" against the others, none is
        return out if len(out) == 1 else []


def rank_of_log(path: str) -> str | None:
    """The local rank a torchrun --log-dir file belongs to (`.../attempt_0/3/stderr.log` -> "3")."""
    parts = path.replace("\\", "/").split("/")
    if len(parts) >= 3 and parts[-3].startswith("attempt_") and parts[-2].isdigit():
        return parts[-2]
    return None


def shared_and_ranked(paths: Iterable[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Log files split into the job's shared ones and each local rank's own."""
    shared: list[str] = []
    ranked: dict[str, list[str]] = {}
    for p in paths:
        rank = rank_of_log(p)
        if rank is None:
            shared.append(p)
        else:
            ranked.setdefault(rank, []).append(p)
    return shared, ranked
