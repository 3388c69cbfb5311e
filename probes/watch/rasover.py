"""NCCL RAS over time: `ncclras` asked again and again while the job runs. One snapshot gives false
mismatches (a collective in flight on some ranks only); a mismatch counts only when the same
communicator's op counts stay apart, with no rank's count moving, across the whole window.
Counts that move are the job's collectives completing: progress, even when the logs are silent."""
from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..base import ProbeContext
from ..ras import JSON_SINCE, LEG_TIMEOUT_S, as_evidence, client_version, loads_json, parse


def op_counts(text: str) -> dict[tuple[str, str, str], int]:
    """(communicator, rank, op) -> count from JSON output; {} for text (it prints only the
    counts that disagree, which parse() reads)."""
    if not text.lstrip().startswith("{"):
        return {}
    try:
        doc = loads_json(text)
    except ValueError:
        return {}
    out: dict[tuple[str, str, str], int] = {}
    for comm in doc.get("communicators") or [] if isinstance(doc, dict) else []:
        if not isinstance(comm, dict):
            continue
        for r in comm.get("ranks") or []:
            if not isinstance(r, dict):
                continue
            for op, n in (r.get("collective_counts") or {}).items():
                if isinstance(n, int):
                    out[(str(comm.get("hash")), str(r.get("rank")), str(op))] = n
    return out


@dataclass
class Sample:
    at: float
    facts: dict[str, Any]
    counts: dict[tuple[str, str, str], int] = field(default_factory=dict)


class RasOverTime:
    """Samples in; progress and the mismatches that held across `window_s` out."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.samples: list[Sample] = []
        self.last_progress: float | None = None
        self.errors: list[str] = []

    def add(self, at: float, text: str) -> bool:
        """One `ncclras` answer; True when some count moved since the previous answer."""
        try:
            facts = parse(text)
        except ValueError as exc:
            self.errors.append(str(exc))
            return False
        sample = Sample(at, facts, op_counts(text))
        moved = bool(self.samples) and any(n > self.samples[-1].counts.get(k, n) for k, n in sample.counts.items())
        if moved:
            self.last_progress = at
        self.samples.append(sample)
        del self.samples[:-64]  # the window needs the last few; a long job keeps a bounded history
        return moved

    def confirmed(self, now: float) -> list[dict[str, Any]]:
        """Mismatches present in every answer of the last window (two answers or more that span
        it), in communicators whose counts did not move meanwhile."""
        known = [s for s in self.samples if s.at <= now + 1e-9]
        inside = [s for s in known if now - s.at <= self.window_s + 1e-9]
        before = [s for s in known if now - s.at > self.window_s + 1e-9]
        if before:
            inside = [before[-1]] + inside  # the answer at the window's start
        if len(inside) < 2 or inside[-1].at - inside[0].at < self.window_s:
            return []
        first, last = inside[0], inside[-1]
        out = []
        for m in last.facts.get("mismatches") or []:
            key = (m["comm"], m["op"])
            if not all(any((x["comm"], x["op"]) == key and x["counts"] == m["counts"]
                           for x in s.facts.get("mismatches") or []) for s in inside):
                continue
            moved = any(n != first.counts.get(k, n) for k, n in last.counts.items() if k[0] == m["comm"])
            if not moved:
                out.append(m)
        return out

    def facts(self, now: float) -> dict[str, Any] | None:
        """The latest answer's facts with only the confirmed mismatches, and its evidence."""
        if not self.samples:
            return None
        latest = dict(self.samples[-1].facts)
        latest["mismatches_seen"] = latest.get("mismatches") or []
        latest["mismatches"] = self.confirmed(now)
        latest["answers"] = len(self.samples)
        latest["window_s"] = self.window_s
        latest["evidence"] = as_evidence(latest)
        return latest


class RasPoller:
    """Asks `ncclras` every `every_s` seconds in its own thread (a slow answer must not stall the
    watch) and feeds a RasOverTime; `on_progress()` is called when counts move."""

    def __init__(self, window_s: float, every_s: float, ctx: ProbeContext | None = None,
                 on_progress: Any = None) -> None:
        self.ctx = ctx or ProbeContext()
        self.over = RasOverTime(window_s)
        self.every_s = every_s
        self.on_progress = on_progress
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self.exe = shutil.which("ncclras", path=self.ctx.env.get("PATH"))
        self._argv: list[str] = []
        self._thread: threading.Thread | None = None

    @property
    def available(self) -> bool:
        return self.exe is not None

    def start(self) -> None:
        if not self.exe:
            return
        version = client_version(self.ctx, self.exe)
        self._argv = [self.exe, "-t", str(LEG_TIMEOUT_S)] + (
            ["-f", "json"] if version is not None and version >= JSON_SINCE else [])
        self._thread = threading.Thread(target=self._run, name="watch-ras", daemon=True)
        self._thread.start()

    def ask(self) -> None:
        res = self.ctx.runner(self._argv, timeout=2 * LEG_TIMEOUT_S + 10)
        if res.error or res.returncode != 0:
            with self.lock:
                self.over.errors.append(res.error or (res.stderr.strip().splitlines() or ["?"])[-1])
            return
        with self.lock:
            moved = self.over.add(time.monotonic(), res.stdout)
        if moved and self.on_progress is not None:
            self.on_progress()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.ask()
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2 * LEG_TIMEOUT_S + 12)

    def facts(self) -> dict[str, Any] | None:
        with self.lock:
            return self.over.facts(time.monotonic())


def mismatch_ranks(facts: Mapping[str, Any]) -> list[str]:
    return sorted({r for m in facts.get("mismatches") or [] for r in m.get("odd") or []})
