"""Several nodes, one incident: the watchers of a multi-node job (`srun --ntasks-per-node=1
distdoctor run --evidence-dir /shared/dd -- torchrun ...`) agree through that folder on a shared
file system.

Each watcher owns `DIR/<host>/`: `node.json` (its host, node rank, start), `heartbeat.json` (when
its ranks last progressed, rewritten every few seconds), and on a confirmed hang or a rank's death
a marker (`hang.json`, `failure.json`) with the onset, then `captured.json` (what it took, where)
once its evidence is in. A hang is confirmed only when no rank on any node progressed for the
stall window (a node's ranks waiting in a collective while another node's compute is not a hang);
a marker from any node makes every node capture its own ranks at once. The leader is the node
with the lowest node rank (then the host name) among the nodes registered for this run: it waits
for every node's capture (a bounded wait; the nodes that never answered are named) and gives the
one verdict, `DIR/verdict.json`; the others wait for it, and give it themselves only when the
leader never does. Every write is atomic (a temporary file, then a rename); a folder that
vanishes or a node that never writes makes a note, never a hang or a traceback."""
from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from distdoctor.knowledge.atomicfile import write_atomic
from distdoctor.knowledge.i18n import t

from .launch import option_value

HEARTBEAT_EVERY_S = 2.0
READ_EVERY_S = 1.0  # the others' markers and heartbeats are read at most this often (a shared
# file system serves every node's watcher)
CLOCK_SLACK_S = 5.0  # the nodes' clocks (NTP) and srun's start jitter: a marker this much older
# than this watcher's start belongs to an earlier run in the same folder
SAME_RUN_S = 600.0  # nodes of one run register within this of each other (srun starts them together)
WAIT_S = 60.0  # the longest wait for the other nodes' captures, and for the verdict
POLL_S = 0.5
MARKERS = {"hang": "hang.json", "failed": "failure.json"}
VERDICT = "verdict.json"


def write_json(path: Path, data: Any) -> bool:
    """Write `data` as JSON atomically (a reader sees the old file or the new, never half);
    False when the folder is gone or not writable."""
    try:
        write_atomic(path, json.dumps(data, indent=1, default=str), mode=0o644)
    except OSError:
        return False
    return True


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from `path`; None when absent, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.strip().isdigit() else None


def job_nodes(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int | None, int | None, str]:
    """(this node's rank, the number of nodes, a key every node of the run shares) from the launch
    line (torchrun's --node-rank, --nnodes N or MIN:MAX, --rdzv-id, --master-addr/--master-port,
    --rdzv-endpoint) and the environment (a rank's GROUP_RANK and GROUP_WORLD_SIZE, NODE_RANK,
    SLURM_NODEID, SLURM_NNODES); None where unknown."""
    node = _int(option_value(argv, "--node-rank", "--node_rank"))
    for name in ("GROUP_RANK", "NODE_RANK", "SLURM_NODEID"):
        node = node if node is not None else _int(env.get(name))
    nodes = option_value(argv, "--nnodes")
    count = _int((nodes or "").rpartition(":")[2]) if nodes else None
    for name in ("GROUP_WORLD_SIZE", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"):
        count = count if count is not None else _int(env.get(name))
    if count is None and _int(env.get("WORLD_SIZE")) and _int(env.get("LOCAL_WORLD_SIZE")):
        count = -(-int(env["WORLD_SIZE"]) // int(env["LOCAL_WORLD_SIZE"]))
    if env.get("SLURM_JOB_ID"):
        key = f"slurm:{env['SLURM_JOB_ID']}.{env.get('SLURM_STEP_ID', '')}"
    else:
        endpoint = option_value(argv, "--rdzv-endpoint", "--rdzv_endpoint") or (
            f"{option_value(argv, '--master-addr', '--master_addr') or env.get('MASTER_ADDR', '')}:"
            f"{option_value(argv, '--master-port', '--master_port') or env.get('MASTER_PORT', '')}")
        rdzv = option_value(argv, "--rdzv-id", "--rdzv_id") or env.get("TORCHELASTIC_RUN_ID", "")
        rdzv = "" if rdzv == "none" else rdzv  # torchrun's default id names nothing
        key = f"{endpoint}/{rdzv}" if endpoint != ":" or rdzv else ""
    return node, count, key


def folder_name(host: str) -> str:
    return re.sub(r"[^\w.-]", "_", host) or "node"


class SharedDir:
    """One watcher's side of the agreement; `now` is the wall clock (injected in tests)."""

    def __init__(self, root: Path, host: str, *, node_rank: int | None = None, nnodes: int | None = None,
                 run: str = "", now: Callable[[], float] = time.time) -> None:
        self.root, self.host, self.node_rank, self.nnodes, self.run = root, host, node_rank, nnodes, run
        self.own = root / folder_name(host)
        self.now = now
        self.started = now()
        self.notes: list[str] = []
        self._beat = float("-inf")
        self._read: dict[str, tuple[float, Any]] = {}  # what -> (when read, the answer)

    def _write(self, name: str, data: dict[str, Any]) -> bool:
        if write_json(self.own / name, {**data, "host": self.host, "run": self.run}):
            return True
        note = t("the shared evidence folder {dir} could not be written ({name})", dir=self.root, name=name)
        if note not in self.notes:
            self.notes.append(note)
        return False

    def register(self) -> None:
        """Claim DIR/<host>/ for this run: an earlier run's markers there are removed."""
        try:
            self.own.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass  # _write says so
        for name in (*MARKERS.values(), "captured.json", "heartbeat.json"):
            try:
                (self.own / name).unlink()
            except OSError:
                continue  # not there
        old = read_json(self.root / VERDICT)
        if old is not None and seconds(old.get("at")) < self.started - CLOCK_SLACK_S:
            try:  # an earlier run's: no verdict of this run can be there yet (it comes after a stall)
                (self.root / VERDICT).unlink()
            except OSError:
                pass  # another node removed it first
        self._write("node.json", {"node_rank": self.node_rank, "nnodes": self.nnodes, "started": self.started,
                                  "pid": os.getpid()})

    def learn(self, node_rank: int | None, nnodes: int | None) -> None:
        """The node rank and count read from the ranks themselves (GROUP_RANK, GROUP_WORLD_SIZE)
        once they run: an elastic rendezvous assigns them; they replace what the launch line said."""
        if (node_rank, nnodes) != (None, None) and (node_rank, nnodes) != (self.node_rank, self.nnodes):
            self.node_rank = node_rank if node_rank is not None else self.node_rank
            self.nnodes = nnodes if nnodes is not None else self.nnodes
            self._write("node.json", {"node_rank": self.node_rank, "nnodes": self.nnodes,
                                      "started": self.started, "pid": os.getpid()})

    # --- reading the others -------------------------------------------------------------------
    def _each(self, name: str) -> dict[str, dict[str, Any]]:
        """host -> DIR/<host>/<name> for every node folder of this run."""
        try:
            folders = sorted(p for p in self.root.iterdir() if p.is_dir())
        except OSError:
            return {}
        out = {}
        for folder in folders:
            doc = read_json(folder / name)
            if doc is not None and doc.get("run", "") == self.run and isinstance(doc.get("host"), str):
                out[doc["host"]] = doc
        return out

    def nodes(self) -> dict[str, dict[str, Any]]:
        """The nodes registered for this run (this one included, even when its folder is gone)."""
        out = {h: d for h, d in self._each("node.json").items()
               if abs(seconds(d.get("started")) - self.started) <= SAME_RUN_S}
        out.setdefault(self.host, {"host": self.host, "node_rank": self.node_rank, "started": self.started})
        return out

    def leader(self) -> str:
        """The node that gives the verdict: the lowest node rank, then the host name."""
        def order(item: tuple[str, dict[str, Any]]) -> tuple[bool, int, str]:
            rank = item[1].get("node_rank")
            return (not isinstance(rank, int), rank if isinstance(rank, int) else 0, item[0])
        return min(self.nodes().items(), key=order)[0]

    def heartbeat(self, last_progress: float, ranks: Sequence[str]) -> None:
        """When this node's ranks last progressed (wall clock), every few seconds."""
        now = self.now()
        if now - self._beat >= HEARTBEAT_EVERY_S:
            self._beat = now
            self._write("heartbeat.json", {"at": now, "last_progress": last_progress, "ranks": list(ranks)})

    def _recent(self, what: str, read: Callable[[], Any]) -> Any:
        """read()'s answer, read again only every READ_EVERY_S seconds."""
        now = self.now()
        when, answer = self._read.get(what, (float("-inf"), None))
        if now - when >= READ_EVERY_S or now < when:
            answer = read()
            self._read[what] = (now, answer)
        return answer

    def others_stalled(self, stall_s: float) -> bool:
        """Every other node saw its own ranks make no progress for the whole stall window, by its
        latest heartbeat (what it did since is not known: a report that the window is not yet
        full is no stall). A node whose heartbeat stopped for a window (its watcher gone) counts
        from the last progress it reported."""
        now = self.now()
        return all(at - last >= stall_s or (now - at >= stall_s and now - last >= stall_s)
                   for at, last in self._beats().values())

    def others_last(self) -> float:
        """The other nodes' last progress by the heartbeats others_stalled() judged (-inf: none)."""
        return max((last for _, last in self._beats().values()), default=float("-inf"))

    def _beats(self) -> dict[str, tuple[float, float]]:
        """host -> (heartbeat time, last progress) of every other node, read every READ_EVERY_S."""
        def read() -> dict[str, tuple[float, float]]:
            nodes = self.nodes()
            return {h: (seconds(b.get("at")), seconds(b.get("last_progress")))
                    for h, b in self._each("heartbeat.json").items() if h != self.host and h in nodes}
        return self._recent("beats", read)

    def last_progress(self) -> float | None:
        """The job's last progress on any node (wall clock), from the heartbeats and captures."""
        seen = [seconds(d.get("last_progress")) for name in ("heartbeat.json", "captured.json")
                for d in self._each(name).values() if d.get("last_progress") is not None]
        return max(seen) if seen else None

    # --- markers, captures, the verdict -------------------------------------------------------
    def mark(self, kind: str, onset: float, ranks: Sequence[str] = ()) -> None:
        """This node confirmed a hang (or saw a rank die): every node captures."""
        self._write(MARKERS["failed" if kind == "failed" else "hang"],
                    {"kind": kind, "onset": onset, "at": self.now(), "ranks": list(ranks)})

    def marker(self) -> dict[str, Any] | None:
        """The first marker another node of this run wrote since this watcher started (the folder
        is read at most every READ_EVERY_S seconds)."""
        def read() -> dict[str, Any] | None:
            found = [d for name in MARKERS.values() for h, d in self._each(name).items()
                     if h != self.host and seconds(d.get("at")) >= self.started - CLOCK_SLACK_S]
            return min(found, key=lambda d: seconds(d.get("at")), default=None)
        return self._recent("marker", read)

    def captured(self, doc: dict[str, Any]) -> None:
        self._write("captured.json", {**doc, "node_rank": self.node_rank, "at": self.now()})

    def captures(self) -> dict[str, dict[str, Any]]:
        return {h: d for h, d in self._each("captured.json").items()
                if seconds(d.get("at")) >= self.started - CLOCK_SLACK_S}

    def missing(self, captures: Mapping[str, Any]) -> list[str]:
        """The nodes that never answered: registered without a capture, or never registered."""
        nodes = self.nodes()
        out = sorted(h for h in nodes if h not in captures)
        if self.nnodes and len(nodes) < self.nnodes:
            ranks = {d.get("node_rank") for d in nodes.values()}
            unknown = [f"node rank {n}" for n in range(self.nnodes) if n not in ranks]
            out += unknown if len(unknown) == self.nnodes - len(nodes) else \
                [f"{self.nnodes - len(nodes)} node(s) that never registered"]
        return out

    def wait_captures(self, timeout: float = WAIT_S, sleep: Callable[[float], None] = time.sleep
                      ) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """Every node's capture, waiting up to `timeout` seconds: (captures, the nodes missing)."""
        end = self.now() + timeout
        while True:
            got = self.captures()
            missing = self.missing(got)
            if not missing or self.now() >= end:
                return got, missing
            sleep(POLL_S)

    def publish(self, verdict: dict[str, Any]) -> bool:
        """Write DIR/verdict.json unless one is there: one verdict per run, whoever is first
        (a hard link creates it or fails, atomically, on NFS too)."""
        path = self.root / VERDICT
        tmp = self.root / f".{VERDICT}.{folder_name(self.host)}.{os.getpid()}.tmp"
        if not write_json(tmp, {**verdict, "run": self.run, "by": self.host, "at": self.now()}):
            return False
        try:
            os.link(tmp, path)
            return True
        except OSError:
            return False  # there already (another node was first), or the folder is gone
        finally:
            try:
                tmp.unlink()
            except OSError:
                pass  # the folder is gone

    def verdict(self) -> dict[str, Any] | None:
        doc = read_json(self.root / VERDICT)
        if doc is None or doc.get("run", "") != self.run or seconds(doc.get("at")) < self.started - CLOCK_SLACK_S:
            return None  # an earlier run's
        return doc

    def wait_verdict(self, timeout: float = WAIT_S, sleep: Callable[[float], None] = time.sleep
                     ) -> dict[str, Any] | None:
        end = self.now() + timeout
        while (found := self.verdict()) is None and self.now() < end:
            sleep(POLL_S)
        return found


def seconds(value: Any) -> float:
    """A time read from another node's file; -inf when it is absent or not a number."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("-inf")
