"""The watch loop: sample the job's progress until it finishes, a rank fails or no rank has
progressed for the stall window; then capture the evidence and conclude. The outcome is the
`run --json` / `watch --json` object."""
from __future__ import annotations

import datetime
import os
import resource
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distdoctor.knowledge.i18n import t

from ..stacks.discover import RankProc, hostname
from . import capture as cap
from .mechanisms import different_collectives
from .nodes import VERDICT, seconds
from .procs import DeathWatch, alive, collective_threads, process_io, read_stat, threads_io
from .progress import Progress, RankView, shared_and_ranked
from .rasover import RasPoller
from .targets import Target
from .verdict import agree, conclude

DISCOVER_FAST_S = 1.0  # look for the ranks this often until they are found
DISCOVER_SLOW_S = 5.0  # then this often (an elastic restart brings new processes)
LOGS_EVERY_S = 2.0  # look for new per-rank log files this often
THREADS_EVERY_S = 5.0  # list each rank's collective threads again this often
DEFAULT_STALL_S = 120.0
MAX_STALL_S = 300.0


@dataclass
class WatchConfig:
    stall_s: float = DEFAULT_STALL_S
    evidence: Path = Path(".")
    kill_on_hang: bool = False
    native: bool = True
    dump_timeout_s: float = 20.0
    log_sources: list[str] = field(default_factory=list)  # folders or files to follow and read
    fr_dir: str | None = None
    on_tick: Callable[[list[RankView]], None] | None = None
    cancel: threading.Event | None = None
    kb: Any = None  # the knowledge base (with the site's overlay), loaded before the job starts
    debug_server: str | None = None  # torch's debug server (start_debug_server), tried at capture
    debug_server_given: bool = False
    ras: bool = True  # ask ncclras over time when it is on PATH (NCCL jobs)
    job_env: dict[str, str] | None = None  # the ranks' environment when known (run); else read from a rank
    versions: dict[str, Any] | None = None  # the job's torch/CUDA/NCCL when known (run)
    backend: str | None = None
    shared: Any = None  # nodes.SharedDir: the job spans several nodes, whose watchers agree through it
    shared_wait_s: float = 60.0  # the longest wait for the other nodes' captures, then for the verdict

    @property
    def interval_s(self) -> float:
        return min(2.0, max(0.25, self.stall_s / 10))

    @property
    def stack_every_s(self) -> float:
        return min(30.0, max(1.0, self.stall_s / 4))


def default_stall(env: dict[str, str] | None = None) -> float:
    """The stall window: half the job's own heartbeat timeout when it sets one (the hang must be
    caught before the watchdog kills the job), else two minutes; at most five."""
    env = env if env is not None else dict(os.environ)
    for name in ("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "TORCH_HEARTBEAT_TIMEOUT_SEC"):
        try:
            return max(5.0, min(MAX_STALL_S, float(env[name]) / 2))
        except (KeyError, ValueError):
            continue
    return DEFAULT_STALL_S


@dataclass
class Outcome:
    outcome: str  # finished | failed | hang
    exit_code: int | None
    hang: dict[str, Any] | None = None
    verdict: dict[str, Any] | None = None
    causes: list[dict[str, Any]] = field(default_factory=list)
    stragglers: list[dict[str, Any]] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    session: str | None = None
    # not in the JSON: what the command line, the session and the report show beside it
    rows: list[RankView] = field(default_factory=list)
    capture: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    survivors: list[int] = field(default_factory=list)
    watcher_cpu_s: float = 0.0
    watched_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "exit_code": self.exit_code, "hang": self.hang,
                "verdict": self.verdict, "causes": self.causes, "stragglers": self.stragglers,
                "evidence": self.evidence, "session": self.session}


def _cpu_self() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _cpu_children() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


class _ChildCost:
    """py-spy's CPU, the watcher's cost too: the children's usage grows only while the launcher
    is not reaped, so a delta across a round of dumps is the dumps' alone."""

    def __init__(self) -> None:
        self.total = 0.0

    def __enter__(self) -> _ChildCost:
        self._before = _cpu_children()
        return self

    def __exit__(self, *exc: object) -> None:
        self.total += max(0.0, _cpu_children() - self._before)


class _Loop:
    def __init__(self, target: Target, config: WatchConfig) -> None:
        self.target, self.config = target, config
        self.start = time.monotonic()
        self.progress = Progress(config.stall_s, self.start, hostname())
        self.procs: dict[str, RankProc] = {}
        self.by_pid: dict[int, str] = {}
        self.wake = threading.Event()
        self.deaths: list[tuple[int, int | None, float, bool]] = []  # pid, code, when, held
        self.lock = threading.Lock()
        self.notes: list[str] = []
        self.death_capture: dict[str, Any] | None = None
        self.next_discover = 0.0
        self.next_logs = 0.0
        self.next_threads = 0.0
        self.io_threads: dict[str, list[int]] = {}
        self.rank_logs: dict[str, list[str]] = {}
        self.shared_logs: list[str] = []
        self.holding = False
        self.child_cost = _ChildCost()
        self.ras = RasPoller(config.stall_s, max(2.0, config.stall_s / 4), on_progress=self._ras_moved) \
            if config.ras else None
        self.watch = DeathWatch(self._died)
        self.learned_nodes = config.shared is None

    def _ras_moved(self) -> None:
        """RAS saw collective counts move: the job progressed, whatever its logs say."""
        self.progress.job_progress = max(self.progress.job_progress, time.monotonic())

    # --- the death thread -----------------------------------------------------------------------
    def _died(self, pid: int, code: int | None) -> None:
        held = False
        if code not in (0, None) and self.target.launched and self.death_capture is None \
                and not self.holding:
            held = self.holding = self.target.hold(pid)  # before the launcher tears the others down
        with self.lock:
            self.deaths.append((pid, code, time.monotonic(), held))
        self.wake.set()

    # --- sampling -------------------------------------------------------------------------------
    def discover(self, now: float) -> None:
        if now < self.next_discover:
            return
        self.next_discover = now + (DISCOVER_SLOW_S if self.procs else DISCOVER_FAST_S)
        for r in self.target.ranks():
            if self.procs.get(r.rank) is not None and self.procs[r.rank].pid == r.pid:
                continue
            self.procs[r.rank] = r
            self.by_pid[r.pid] = r.rank
            self.progress.add_rank(r.rank, r.pid, now)
            if not self.watch.add(r.pid) and not alive(r.pid):
                self.progress.died(r.rank, now, None)
            if not self.learned_nodes:
                self.learned_nodes = self._learn_node(r.pid)

    def _learn_node(self, pid: int) -> bool:
        """This node's rank and the node count from a rank's environment (torchrun's GROUP_RANK
        and GROUP_WORLD_SIZE: an elastic rendezvous assigns them)."""
        from ..base import ProbeContext
        from ..procenv import EnvUnreadable, read_environ
        from .nodes import job_nodes

        try:
            env = read_environ(ProbeContext(), pid)
        except EnvUnreadable:
            return False
        node, count, _ = job_nodes([], env)
        self.config.shared.learn(node, count)
        return True

    def logs(self, now: float) -> None:
        if now >= self.next_logs:
            self.next_logs = now + LOGS_EVERY_S
            shared, ranked = shared_and_ranked(cap.log_files(self.config.log_sources))
            self.shared_logs = shared
            self.rank_logs = {}
            for local, paths in ranked.items():
                rank = next((r.rank for r in self.procs.values() if (r.local_rank or r.rank) == local), local)
                self.rank_logs.setdefault(rank, []).extend(paths)
        self.progress.log_size(None, now, sum(_size(p) for p in self.shared_logs))
        for rank, paths in self.rank_logs.items():
            self.progress.log_size(rank, now, sum(_size(p) for p in paths))

    def cpu(self, now: float) -> None:
        if now >= self.next_threads:  # thread lists change rarely; their io is read every tick
            self.next_threads = now + THREADS_EVERY_S
            self.io_threads = {rank: collective_threads(r.pid) for rank, r in self.procs.items()}
        for rank, r in self.procs.items():
            st = read_stat(r.pid)
            if st is None or st.state in ("Z", "X"):
                if self.progress.ranks[rank].dead_at is None and not self.watch.supported:
                    self._died(r.pid, None)
                continue
            self.progress.cpu(rank, now, st.cpu_s)
            self.progress.process_io(rank, now, process_io(r.pid))
            tids = self.io_threads.get(rank)
            if tids:
                self.progress.collective_io(rank, now, threads_io(r.pid, tids))

    def stacks(self, now: float) -> None:
        if not self.procs or not self.progress.wants_stacks(now, self.config.stack_every_s):
            return
        from .. import stacks

        live = [r for r in self.procs.values() if self.progress.ranks[r.rank].dead_at is None]
        try:
            with self.child_cost:
                dumped = stacks.dump_all(live, self.progress.host, timeout=self.config.dump_timeout_s,
                                         rerun="distdoctor watch")
        except stacks.NoPySpy as exc:
            if str(exc) not in self.notes:
                self.notes.append(str(exc))
            self.progress.last_round = now
            return
        self.progress.stacks(time.monotonic(), {d["rank"]: d["frames"] for d in dumped})
        busy = set(self.progress.needs_native(time.monotonic(), self.config.stack_every_s))
        if busy:
            with self.child_cost:
                native = stacks.dump_all([r for r in live if r.rank in busy], self.progress.host, native=True,
                                         timeout=self.config.dump_timeout_s, rerun="distdoctor watch")
            for d in native:
                self.progress.native(d["rank"], time.monotonic(), d["frames"])

    def handle_deaths(self) -> None:
        with self.lock:
            deaths, self.deaths = self.deaths, []
        for pid, code, when, held in deaths:
            rank = self.by_pid.get(pid)
            if rank is None:
                continue
            self.progress.died(rank, when, code)
            try:
                if code not in (0, None) and self.death_capture is None:
                    if self.config.shared is not None:  # the other nodes capture their ranks now
                        self.config.shared.mark("failed", _wall(when), [rank])
                    # the survivors' stacks now, while the launcher is held (or before it acts)
                    self.death_capture = self.capture("failed", dead=[rank])
            finally:
                if held:
                    self.target.release()
                    self.holding = False

    def tick(self) -> None:
        now = time.monotonic()
        self.discover(now)
        self.handle_deaths()
        self.cpu(now)
        self.logs(now)
        self.stacks(now)
        if self.config.on_tick is not None:
            self.config.on_tick(self.progress.rows(time.monotonic()))

    # --- capture --------------------------------------------------------------------------------
    def node_doc(self, captured: dict[str, Any], outcome: str) -> dict[str, Any]:
        """What this node tells the others (DIR/<host>/captured.json): where its evidence is, its
        own evidence items, its per-rank logs by global rank, its ranks' local numbers."""
        self.next_logs = 0.0
        self.logs(time.monotonic())
        paths = captured.get("paths") or {}
        return {"kind": outcome, "last_progress": _wall(self.progress.last_progress()),
                "evidence": str(self.config.evidence), "stacks": paths.get("stacks"), "ras": paths.get("ras"),
                "extra": captured.get("local_extra", captured.get("extra") or []),
                "fr": [d for d in (self.config.fr_dir, captured.get("fr_live")) if d],
                "logs": self.rank_logs, "shared_logs": self.shared_logs,
                "local_ranks": {r.rank: r.local_rank or r.rank for r in self.procs.values()},
                "exit_codes": {k: r.exit_code for k, r in self.progress.ranks.items() if r.dead_at is not None}}

    def capture(self, kind: str, dead: Sequence[str] = ()) -> dict[str, Any]:
        evidence = self.config.evidence
        notes: list[str] = []
        alive_ranks = [r for r in self.procs.values() if alive(r.pid)]
        result: dict[str, Any] = {"kind": kind, "at": time.monotonic(), "paths": {}, "extra": []}
        if alive_ranks:
            with self.child_cost:
                doc, paths = cap.take_stacks(alive_ranks, evidence, expected=self.target.expected(list(self.procs.values())),
                                             timeout=self.config.dump_timeout_s, native=self.config.native,
                                             notes=notes)
            result["stacks"] = doc
            result["paths"].update(paths)
        dumped = bool(result.get("stacks") and any(r["frames"] for r in result["stacks"]["ranks"]))
        live = cap.from_debug_server(self.config.debug_server, evidence, timeout=min(30.0, self.config.dump_timeout_s),
                                     need_stacks=not dumped, expected=self.target.expected(list(self.procs.values())),
                                     notes=notes, explicit=self.config.debug_server_given)
        if live.get("stacks"):
            result["stacks"] = live["stacks"]
            result["paths"]["stacks"] = live["stacks_path"]
        result["fr_live"] = live.get("fr_dir")
        local = self.mechanisms(result.get("stacks"), alive_ranks)
        for rank in dead:
            code = self.progress.ranks[rank].exit_code
            local.append({
                "source": "stacks", "ranks": [rank], "role": "crashed", "cause": "rank-crash-deadlock",
                "why": t("exited first (exit code {code}) while the other ranks ran", code=code)})
        # what this node's ranks alone show; whether ranks wait in different collectives is read
        # over every rank's stacks (every node's, on several nodes)
        result["local_extra"] = local
        result["extra"] = local + different_collectives(result.get("stacks") or {})
        if alive_ranks and self.config.job_env is None:
            self._learn_job(alive_ranks[0].pid)
        result["notes"] = notes
        return result

    def mechanisms(self, doc: dict[str, Any] | None, ranks: list[RankProc]) -> list[dict[str, Any]]:
        """What the stacks alone do not say: a world size nobody started, mp.spawn under a launcher
        (this node's; the ranks in different collectives are read over every node's stacks)."""
        from .. import stacks
        from .mechanisms import spawned_workers, world_size_mismatch

        if not ranks:
            return []
        try:
            pyspy = stacks.find_pyspy()
        except stacks.NoPySpy:
            return []
        timeout = self.config.dump_timeout_s
        with self.child_cost:
            found = world_size_mismatch(doc or {}, ranks, pyspy, timeout=timeout) if doc else []
            found += spawned_workers(ranks, pyspy, timeout=timeout)
        return found

    def _learn_job(self, pid: int) -> None:
        """The job's environment and versions, from one of its ranks (watch: not launched here)."""
        from ..base import ProbeContext
        from ..procenv import EnvUnreadable, read_environ
        from .launch import job_versions

        try:
            self.config.job_env = read_environ(ProbeContext(), pid)
        except EnvUnreadable:
            return
        if self.config.versions is None:
            try:
                exe = os.readlink(f"/proc/{pid}/exe")
            except OSError:
                return
            self.config.versions = job_versions(exe)[0]

    def why_no_dump(self, result: dict[str, Any]) -> None:
        """No Flight Recorder dump after a hang or failure: say why, for this torch."""
        if result.get("fr") is not None or self.config.job_env is None:
            return
        from ..flightrec.missing import reasons_text, why_no_dump

        versions = self.config.versions or {}
        has_nccl = bool(versions.get("cuda") or versions.get("hip")) if versions.get("torch") else None
        reasons = why_no_dump(versions.get("torch"), self.config.job_env, has_nccl=has_nccl,
                              exit_codes=[r.exit_code for r in self.progress.ranks.values()])
        result["fr_missing"] = reasons
        result.setdefault("notes", []).extend(reasons_text(reasons))

    def finish_capture(self, result: dict[str, Any]) -> dict[str, Any]:
        """What is read once the job is over or held: Flight Recorder, RAS, GPU state, logs."""
        evidence = self.config.evidence
        notes = result.setdefault("notes", [])
        result["fr"], fr_path = cap.flight_recorder(self.config.fr_dir, evidence, notes)
        if result["fr"] is None and result.get("fr_live"):
            result["fr"], fr_path = cap.flight_recorder(result["fr_live"], evidence, notes)
        if fr_path:
            result["paths"]["flight_recorder"] = fr_path
        if self.ras is not None and self.ras.available:
            self.ras.ask()  # the state at the capture, after the window's answers
            result["ras"] = self.ras.facts()
            ras_path = cap.write_part(evidence / "ras.json", result["ras"]) if result["ras"] else None
        else:
            result["ras"], ras_path = None, None
        if ras_path:
            result["paths"]["ras"] = ras_path
        if result.get("kind") in ("hang", "failed"):
            self.why_no_dump(result)
        result["paths"].update(cap.gpu_state(evidence, None, notes))
        result["logs"] = cap.log_files(self.config.log_sources)
        result["paths"]["logs"] = result["logs"]
        return result


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _wall(mono: float) -> float:
    """A time.monotonic() instant on the wall clock (what other nodes compare)."""
    return time.time() - (time.monotonic() - mono)


def _iso(wall: float) -> str:
    return datetime.datetime.fromtimestamp(wall, datetime.timezone.utc).isoformat(timespec="seconds")


def watch_job(target: Target, config: WatchConfig) -> Outcome:
    """Watch until the job ends, fails or hangs; capture, conclude, end the job when asked."""
    config.evidence.mkdir(parents=True, exist_ok=True)
    cpu0 = _cpu_self()
    loop = _Loop(target, config)
    shared = config.shared
    if shared is not None:
        shared.register()
    if loop.ras is not None:
        loop.ras.start()
    kind = ""
    hang: dict[str, Any] | None = None
    captured: dict[str, Any] | None = None
    try:
        while True:
            loop.tick()
            now = time.monotonic()
            if target.ended():
                loop.handle_deaths()
                break
            if config.cancel is not None and config.cancel.is_set():
                kind = "cancelled"
                break
            if shared is not None:
                shared.heartbeat(_wall(loop.progress.last_progress()), sorted(loop.procs))
            # another node confirmed a hang or saw a rank die: this node's ranks are taken too
            remote = shared.marker() if shared is not None and loop.procs else None
            if remote is not None or (loop.progress.stalled(now) and (
                    shared is None or shared.others_stalled(config.stall_s))):
                last = loop.progress.last_progress()
                kind = "failed" if loop.progress.failed_ranks() or (remote or {}).get("kind") == "failed" else "hang"
                # the job's onset is the last progress on any node as the confirming node knew it
                # then: every node reports one hang, and progress seen later cannot shorten it
                if remote is not None:
                    host = remote.get("host")
                    loop.notes.append(t("a rank died on {host}: this node's ranks were taken at once", host=host)
                                      if remote.get("kind") == "failed" else
                                      t("{host} confirmed a hang: this node's ranks were taken at once", host=host))
                    at, onset = seconds(remote.get("at")), seconds(remote.get("onset"))
                    onset = onset if onset > float("-inf") else min(_wall(last), at)
                else:  # what others_stalled() judged: onset is at least the stall window before
                    at, onset = _wall(now), max(_wall(last), shared.others_last() if shared else float("-inf"))
                    if shared is not None:
                        shared.mark(kind, onset, loop.progress.failed_ranks() or sorted(loop.procs))
                captured = loop.capture(kind, dead=loop.progress.failed_ranks()[:1])
                hang = {"confirmed_at": _iso(at), "detected_after_s": round(at - onset, 1)}
                break
            loop.wake.wait(config.interval_s)
            loop.wake.clear()
        rows = loop.progress.rows(time.monotonic())
        code = target.exit_code()
        failed = loop.progress.failed_ranks()
        if kind in ("hang", "failed"):
            outcome = kind
            if captured is not None:
                loop.finish_capture(captured)
        elif kind == "cancelled":
            outcome = "failed"
            target.end()
        else:
            outcome = "finished" if (code in (0, None) and not failed) else "failed"
            captured = loop.death_capture or {"kind": outcome, "paths": {}, "extra": [], "notes": []}
            if outcome == "failed" and not captured.get("extra") and failed:
                more = loop.capture("failed", dead=failed[:1])
                captured["extra"], captured["local_extra"] = more["extra"], more["local_extra"]
            captured["kind"] = outcome
            loop.finish_capture(captured)
        verdict: dict[str, Any] | None = None
        causes: list[dict[str, Any]] = []
        if outcome != "finished" and shared is not None and kind != "cancelled":
            captured = captured or {"kind": outcome, "paths": {}, "extra": [], "notes": []}
            doc, merged = agree(shared, loop.node_doc(captured, outcome), config.kb, backend=config.backend,
                                wait_s=config.shared_wait_s, notes=loop.notes)
            verdict = dict(doc.get("verdict") or {}, given_by=doc.get("by"), nodes=doc.get("nodes") or [])
            causes = list(doc.get("causes") or [])
            captured["paths"]["verdict"] = str(shared.root / VERDICT)
            if merged is not None:  # this node concluded: its session and report hold every node's evidence
                captured.update({k: merged[k] for k in ("stacks", "fr", "ras", "logs_report") if merged.get(k)})
                captured["paths"]["stacks_all_nodes"] = merged["paths"].get("stacks")
        elif outcome != "finished":
            concluded = conclude(dict(captured or {"kind": outcome}, backend=config.backend), config.kb)
            verdict = {"culprit": concluded["culprit"], "summary": concluded["summary"],
                       "confidence": concluded["confidence"]}
            causes = concluded["causes"]
            (captured or {})["logs_report"] = concluded["logs"]
        elif shared is not None:  # so that no node waits for this one's capture
            shared.captured({"kind": outcome, "last_progress": _wall(loop.progress.last_progress())})
        if outcome == "failed":
            hang = None
        if kind in ("hang", "failed") and config.kill_on_hang:
            # only now: the logs were read as the hang left them, without the launcher's
            # lines about the ending (a SIGTERM reads as a crash)
            target.end()
    finally:
        if shared is not None:
            loop.notes.extend(shared.notes)
        loop.watch.close()
        if loop.ras is not None:
            loop.ras.stop()
        target.release()
    out = Outcome(outcome, code, hang, verdict, causes, loop.progress.stragglers() if outcome == "finished" else [],
                  {k: v for k, v in (captured or {}).get("paths", {}).items() if v},
                  rows=rows, capture=captured or {}, notes=loop.notes + list((captured or {}).get("notes") or []))
    out.exit_code = target.exit_code()
    out.survivors = target.survivors() if (target.launched or config.kill_on_hang) else []
    out.watcher_cpu_s = round(_cpu_self() - cpu0 + loop.child_cost.total, 3)
    out.watched_s = round(time.monotonic() - loop.start, 1)
    return out
