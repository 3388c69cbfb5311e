"""The per-rank timeline: for every rank, its files, how it was identified, the phase it reached,
its last collective and how it ended (a traceback, a lost peer, a timeout, an exit code, or unknown).

Everything here is read from the rank's own lines. A rank with no line in the input has no entry:
people paste excerpts, so a missing line is never taken as evidence of anything.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..i18n import t as tr
from ..lazyre import lazy
from . import extract as x
from .records import Exc, Hit
from .view import View

SIGNAL_EXITS = {-9: "SIGKILL", -11: "SIGSEGV", -6: "SIGABRT", -7: "SIGBUS", -15: "SIGTERM", -2: "SIGINT",
                -1: "SIGHUP"}
STOP_SIGNALS = {-15, -2, -1}  # what a launcher sends the other ranks once one has failed
INTERRUPTED = "SIGINT: KeyboardInterrupt"  # the end of a rank whose own traceback ends in KeyboardInterrupt
_ATTEMPT = lazy(r"attempt_\d+[/\\](\d+[/\\][^/\\]+)$")


def short(path: str) -> str:
    """`1/stderr.log` for torchrun's per-rank folders, else the file's base name."""
    m = _ATTEMPT.search(path)
    if m:
        return m.group(1).replace("\\", "/")
    return re.split(r"[/\\]", path)[-1] or path


def when(rl: RankLine, phase: bool = True) -> str:
    """` after step 5`, or ` during eval` when no step is known (and `phase`)."""
    if rl.step:
        return tr(" after {kind} {n}", kind=rl.step[0], n=rl.step[1])
    return tr(" during {phase}", phase=tr(rl.phase)) if phase and rl.phase else ""


def where(hit: Hit) -> str:
    return f"{short(hit.file)}:{hit.line}"


@dataclass
class End:
    """How a rank's lines end. kind: crashed (its own failure), lost-peer (it raised because a
    peer went away), timeout (a watchdog or collective timeout), killed (a signal from outside),
    stopped (SIGTERM/SIGINT/SIGHUP: the launcher stopping the rest), exited (a non-zero exit
    code), finished, or unknown (the lines just stop)."""

    kind: str
    detail: str = ""
    hit: Hit | None = None
    exc: Exc | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "detail": self.detail}
        if self.hit is not None:
            d.update(file=self.hit.file, line=self.hit.line)
            if self.hit.ts is not None:  # [kind, seconds] (extract.timestamp): 2 a full date, 1 glog's
                d["ts"] = list(self.hit.ts)
        if self.exc is not None:
            d.update(type=self.exc.type, message=self.exc.message[:300])
        return d


@dataclass
class RankLine:
    rank: str
    files: list[str] = field(default_factory=list)
    learnt: str = "prefix"  # path (per-rank file or folder), prefix ([rankN]:), nccl (host:pid)
    hosts: list[str] = field(default_factory=list)
    last_ts: tuple[int, float] | None = None  # its last timestamped line near the end of its logs
    phase: str | None = None
    step: tuple[str, int] | None = None
    last_collective: dict[str, Any] | None = None
    end: End = field(default_factory=lambda: End("unknown"))
    exitcode: int | None = None

    def doing(self) -> str:
        """A few words on where the rank was: `step 5`, `all_reduce (SeqNum 12)`, `eval`."""
        parts = []
        if self.last_collective and self.last_collective.get("op"):
            op = str(self.last_collective["op"]).lower()
            seq = self.last_collective.get("seq")
            parts.append(f"{op}" + (f" (SeqNum {seq})" if seq is not None else ""))
        return (" ".join(parts) + when(self)).strip()

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "files": self.files, "learnt": self.learnt, "hosts": self.hosts,
                "phase": self.phase, "step": {"kind": self.step[0], "n": self.step[1]} if self.step else None,
                "last_collective": self.last_collective, "end": self.end.to_dict(), "exitcode": self.exitcode,
                "last_ts": list(self.last_ts) if self.last_ts else None}


def build(view: View) -> dict[str, RankLine]:
    col = view.col
    lines: dict[str, RankLine] = {}

    def line_of(r: str) -> RankLine:
        return lines.setdefault(r, RankLine(r))

    path_ranks = {f.name: f.rank for f in col.files if f.rank is not None}
    for key, files in col.seen.items():
        r = _rank(view, key)
        if r is None or not r.isdigit():
            continue
        rl = line_of(r)
        rl.files = sorted(set(rl.files) | files)
        if any(path_ranks.get(fn) == r for fn in files):
            rl.learnt = "path"
        elif ":" in key:
            rl.learnt = "nccl"
    for r in list(col.progress) + list(col.phases):
        if r.isdigit():  # a rank known only from its own progress or phase lines still has a timeline
            line_of(r)
    for r, kinds in col.progress.items():
        for kind in ("step", "iteration", "batch"):
            if kind in kinds and r in lines:
                lines[r].step = (kind, kinds[kind][0])
                break
    for r, ts in col.last_ts.items():
        if r in lines:
            lines[r].last_ts = ts
    for r, (ph, _hit) in col.phases.items():
        if r in lines:
            lines[r].phase = ph
    for pg, per in view.timeouts.items():
        for r, t in per.items():
            if r in lines or r.isdigit():
                rl = line_of(r)
                rl.last_collective = {"op": t.op, "seq": t.seq, "pg": pg}
                rl.end = End("timeout", tr("timed out in {op}", op=(t.op or tr("a collective")).lower())
                             + (f" (SeqNum {t.seq})" if t.seq is not None else ""),
                             Hit("watchdog-timeout", t.file, t.line, t.text, r, None, t.ts, (0, t.line)))
    for op, hits in col.ops.items():
        for h in hits:
            r = view.rank(h)
            if r is not None and r in lines and lines[r].last_collective is None:
                lines[r].last_collective = {"op": op, "seq": None, "pg": None}
    for r, (code, hit) in col.elastic_exits.items():
        if r in lines or r.isdigit():
            rl = line_of(r)
            rl.exitcode = code
            if rl.end.kind == "unknown" and not restarted(view, hit):
                sig = SIGNAL_EXITS.get(code)
                kind = "stopped" if code in STOP_SIGNALS else "killed" if sig else "exited"
                rl.end = End(kind, tr("exit code {code}", code=code) + (f" ({sig})" if sig else ""), hit)
    for h in view.crashes:
        r = view.rank(h)
        # an exit code alone is the launcher's word that the rank ended, not why: a waiter that
        # timed out exits non-zero too (see the exits above)
        if r is not None and r.isdigit() and not h.sig.startswith("crash-exitcode") and not recovered(view, r, h):
            rl = line_of(r)
            # a line that only reports the SIGKILL its exit record already gave keeps the rank killed
            # (SIGABRT, SIGSEGV, SIGBUS are the process's own faults: their lines make it crashed)
            same_kill = rl.end.kind == "killed" and rl.exitcode == -9 and _signal_line(h.text, {-9})
            if rl.end.kind in ("unknown", "exited", "killed", "stopped") and not _stop_line(h.text) and not same_kill:
                rl.end = End("crashed", h.text[:160], h)
    for exc in col.exceptions:
        r = view.rank(exc.hit)
        if r is None or not r.isdigit() or recovered(view, r, exc.hit):
            continue
        if exc.launcher:
            # a rank's own KeyboardInterrupt traceback: SIGINT reached that rank (Ctrl-C, kill -INT),
            # a stop from outside that ends it; the launcher's own exceptions name no rank
            if exc.type == "KeyboardInterrupt" and exc.traceback and lines.get(r, RankLine(r)).end.kind in (
                    "unknown", "exited", "stopped"):
                line_of(r).end = End("killed", INTERRUPTED, exc.hit)
            continue
        rl = line_of(r)
        if exc.peer_loss:
            if rl.end.kind in ("unknown", "exited", "killed", "stopped"):
                kind = "timeout" if x.TIMED_OUT.search(exc.message) else "lost-peer"
                rl.end = End(kind, f"{exc.type}: {exc.message[:160]}", exc.hit, exc)
            if rl.last_collective is None:
                rl.last_collective = _op_near(view, r, exc.hit)
        elif rl.end.kind in ("unknown", "exited", "killed", "stopped", "lost-peer") or (
                rl.end.kind == "crashed" and rl.end.exc is None and exc.hit.order < (rl.end.hit.order if rl.end.hit else (0, 0))):
            rl.end = End("crashed", f"{exc.type}: {exc.message[:160]}", exc.hit, exc)
    for rl in lines.values():
        if rl.end.kind == "unknown" and rl.phase == "teardown":
            rl.end = End("finished", "reached teardown (destroy_process_group or a finish line)")
    for h in view.hits_with("end"):
        r = view.rank(h)
        if r is not None and r in lines and lines[r].end.kind == "unknown":
            lines[r].end = End("finished", h.text[:120], h)
    hosts: dict[str, set[str]] = {}  # rank -> the hosts of its NCCL host:pid keys, in one pass
    for k in col.seen:
        if ":" in k:
            r = _rank(view, k)
            if r is not None and r in lines:
                hosts.setdefault(r, set()).add(k.split(":")[0])
    for r, rl in lines.items():
        rl.hosts = sorted(hosts.get(r, ()))
    return {r: lines[r] for r in sorted(lines, key=lambda k: (len(k), k))}


def _stop_line(text: str) -> bool:
    return _signal_line(text, STOP_SIGNALS)


def _signal_line(text: str, codes: set[int]) -> bool:
    """Whether the line reports an exit by one of these signals (`exitcode : -9`, `SIGKILL`)."""
    flat = " ".join(text.split()).replace("exitcode:", "exitcode :")
    return any(c in SIGNAL_EXITS and (f"exitcode : {c}" in flat or SIGNAL_EXITS[c] in text) for c in codes)


def _rank(view: View, key: str) -> str | None:
    if ":" in key:
        mapped = view.col.proc_rank.get(key)
        return mapped[1] if mapped else None
    return key


def recovered(view: View, rank: str, hit: Hit) -> bool:
    """A rank that printed training progress after the failure line went on: it was handled. So
    was a line inside a traceback that a WARNING record printed (logged, not raised)."""
    if logged(view, hit):
        return True
    if terminal(view, rank, hit):
        return False
    # its last progress line in the same file: a tee'd console and the rank's own file both count
    return view.col.last_step_line.get((rank, hit.file), 0) > hit.line


def own_copies(view: View, lines: dict[str, RankLine]) -> None:
    """Point each crashed rank's end at the same exception in the rank's own file when a console
    that many ranks share held it too (torchrun --tee writes both): the line to open. Called once
    the culprit is chosen: only the shared console's order says which rank raised first."""
    writers: dict[str, set[str]] = {}
    for r, files in view.col.seen.items():
        for name in files:
            writers.setdefault(name, set()).add(r)
    for exc in view.col.exceptions:
        r = view.rank(exc.hit)
        rl = lines.get(r or "")
        now = rl.end.exc if rl is not None and rl.end.kind == "crashed" else None
        if now is not None and writers.get(exc.hit.file) == {r} and writers.get(now.hit.file) != {r} \
                and (exc.type, exc.message) == (now.type, now.message):
            rl.end = End("crashed", rl.end.detail, exc.hit, exc)


def terminal(view: View, rank: str, hit: Hit) -> bool:
    """Whether the line is the rank's last traceback before the launcher's record of its non-zero
    exit in the same file: the exception that ended the process. In one console the launcher
    interleaves each rank's stdout and stderr, and a rank's buffered stdout (its step lines) can
    land after its own traceback, so progress printed later in the file does not show it went on.
    Silent without that exit record (a paste that stops before it), with a later traceback, or
    when a restart that followed the record finished (the exception ended an attempt, not the run)."""
    code, end = view.col.elastic_exits.get(rank, (0, None))
    if not code or end is None or end.file != hit.file or end.line <= hit.line or restarted(view, end):
        return False
    tracebacks = [e.hit.line for e in view.col.exceptions if e.traceback and not e.launcher
                  and e.hit.file == hit.file and view.rank(e.hit) == rank and e.hit.line < end.line]
    return bool(tracebacks) and max(tracebacks) == hit.line


def restarted(view: View, hit: Hit) -> bool:
    """Whether a failure line ended an attempt the launcher restarted (torchrun --max-restarts) and
    the run then finished: in the same file, every rank the line names (or, for a launcher's line
    that names none, every rank the file shows) reached its finish after it. Progress alone is not
    enough: a rank's buffered stdout may reach the console after its own exit record."""
    r = view.rank(hit)
    done = {view.rank(h) for h in view.hits_with("end") if h.file == hit.file and h.line > hit.line}
    done |= {rank for rank, (ph, h) in view.col.phases.items()
             if ph == "teardown" and h.file == hit.file and h.line > hit.line}
    seen = {rank for (rank, name) in view.col.last_step_line if name == hit.file}
    return r in done if r is not None else bool(seen) and seen <= done


def _op_near(view: View, rank: str, hit: Hit) -> dict[str, Any] | None:
    """The collective named by the traceback frames just before a rank's exception."""
    best = None
    for op, hits in view.col.ops.items():
        for h in hits:
            if view.rank(h) == rank and h.file == hit.file and 0 <= hit.line - h.line <= 60:
                if best is None or h.line > best[1]:
                    best = (op, h.line)
    return {"op": best[0], "seq": None, "pg": None} if best else None


def only_waits_raised(view: View) -> bool:
    """Whether every exception the processes raised (none of them given to a rank: a console without
    rank prefixes) is a wait that gave up (a timeout, a lost peer, a store wait): then each exit
    record is a waiter's own exit, and the launcher's "first failure" is only the first to give up."""
    raised = [e for e in view.col.exceptions if not e.launcher]
    return bool(raised) and all(e.peer_loss and view.rank(e.hit) is None for e in raised)


def exceptions_unranked(view: View) -> list[Exc]:
    """Root exceptions no rank could be given to (a single-process excerpt)."""
    return [e for e in view.col.exceptions if view.rank(e.hit) is None and not e.launcher
            and not e.peer_loss and not _recovered_any(view, e.hit)]


def handled(view: View, hit: Hit) -> bool:
    """Whether a failure line was handled: its rank went on (recovered), or, for a line no rank
    could be given to, every rank whose progress the same file shows went on past it (a rank that
    died of it could not have). Such a line is a fact about the run, not evidence of a failure (a
    logged warning with a traceback, a retried connection)."""
    r = view.rank(hit)
    if r is not None or logged(view, hit):
        return recovered(view, r or "", hit)
    last = [line for (_rank, name), line in view.col.last_step_line.items() if name == hit.file]
    return bool(last) and all(line > hit.line for line in last)


def _recovered_any(view: View, hit: Hit) -> bool:
    return view.col.file_progress.get(hit.file, 0) > hit.line or logged(view, hit)


def logged(view: View, hit: Hit) -> bool:
    """Whether the line lies in a traceback a logging WARNING record printed (caught and logged)."""
    return any(f.name == hit.file and a <= hit.line <= b for f in view.col.files for a, b in f.logged)


__all__ = ["End", "RankLine", "build", "exceptions_unranked", "handled", "logged", "recovered", "restarted", "short",
           "where"]
