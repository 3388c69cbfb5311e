"""The log fact extractors, each declared once: the words that gate it, whether a repeated line can
change what it records (an event) or not (a fact decided once), the prefilter pattern that brings
its lines when no signature does, and what it records in the Collector.

The Collector runs the table in order on every candidate line; the prefilter's triggers
(compiled.TRIGGERS) and the scan's repeat test (scan.fact_only) are read off it, so adding an
extractor is one entry here and its handler.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..frozen import Frozen, frozen
from . import extract as x
from .records import StoreWait

# A handler's first argument is the Collector (collect.py), which imports this table: it is not
# imported back (no two modules import each other), so it is typed by this name only.
Collector = Any

TRACEBACK_SPAN = 400  # an exception line this close after a traceback header (or a store frame) ends it
MAX_HITS = 40  # lines kept per signature or kind (the count is kept in full)
VERSION_SPAN = 12  # a bare `NCCL version` line this close after a process's fact line is that process's
EVENT, FACT = "event", "fact"


@frozen
class Extractor(Frozen):
    """One extractor: it runs on a line holding one of `words`."""

    id: str
    words: tuple[str, ...]
    # "event": what it records depends on the line's position or count (exceptions, exits,
    # announcements): a repeated line is always read. "fact": decided once (first wins) or a
    # maximum: a repeat changes nothing and the scan may drop it.
    repeats: str
    handle: Callable[[Collector, int, str, x.Who, str], None]
    # the prefilter pattern for lines no signature brings ("" when another extractor's or the
    # signatures' patterns already bring them)
    trigger: str = ""
    # an event only when this matches too (a word as common as "rank")
    event_if: re.Pattern[str] | None = None

    def event(self, text: str) -> bool:
        """Whether this line is an event for this extractor (its repeats must be read)."""
        return self.repeats == EVENT and any(w in text for w in self.words) and (
            self.event_if is None or self.event_if.search(text) is not None)


def _sample_ids(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    m = x.SAMPLE_IDS.search(text)
    if m and who.rank is not None and m.group("ids").count(",") >= 1:
        ids = " ".join(m.group("ids").split())
        if len(col.sample_ids) < MAX_HITS * 4:
            col.sample_ids[ids].setdefault(who.rank, col.hit("x-sample-ids", line, text, who))


def _epoch_size(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    if who.rank is not None and who.rank not in col.epoch_sizes:
        m = x.EPOCH_SIZE.search(text)
        if m:
            col.epoch_sizes[who.rank] = (int(m.group("n")), col.hit("x-epoch-size", line, text, who))


def _spawned(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    col.spawn(line, text, who)


def _user_frame(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    frame = x.user_frame(text)
    if frame is not None and col.file is not None:
        col.file.user_frame[key] = (frame, line)


def _named_late(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    m = x.NAMED_LATE.search(text)
    for r in m.group("ranks").replace(" ", "").split(",") if m else ():
        col.named_late.setdefault(r, col.hit("x-named-late", line, text, who))


def _store_wait(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    """A store wait or get that gave up: the keys it lists, or a bare "Socket Timeout" raised from
    a store wait (a DistStoreError, or a store wait/get frame in the traceback before it)."""
    f = col.file
    assert f is not None
    keys = x.store_keys(text)
    if keys is None and x.RAISED_IN_STORE.search(text):
        # the provenance line follows the message it belongs to (within the line or two a paste keeps)
        prev = next((e for e in reversed(col.exceptions[-4:]) if e.hit.file == f.name
                     and 0 < line - e.hit.line <= 2 and "Socket Timeout" in e.message), None)
        if prev is not None and len(col.store_waits) < MAX_HITS and all(w.hit is not prev.hit for w in col.store_waits):
            col.store_waits.append(StoreWait(prev.hit.rank, (), prev.hit))
        return
    if keys is None and x.STORE_FRAME.search(text):
        f.store_frame[key] = line
        return
    if keys is None and "Socket Timeout" in text and x.exception(text) is not None:
        frame = max(f.store_frame.get(key, 0), f.store_frame.get("?", 0))
        if "DistStoreError" in text or (frame and line - frame <= TRACEBACK_SPAN):
            keys = ()
    if keys is not None and len(col.store_waits) < MAX_HITS:
        col.store_waits.append(StoreWait(who.rank, keys, col.hit("x-store-wait", line, text, who)))


def _resume(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    col.resumed(line, text, who)


def _warning(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    if x.LOG_WARNING.search(text) and col.file is not None:
        col.file.warning = (key, line)


def _traceback_or_exception(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    f = col.file
    assert f is not None
    if x.TRACEBACK in text:
        f.tracebacks[key] = line
        # an unprefixed header belongs to whoever wrote the record before it
        printed = f.warning is not None and f.warning[1] == line - 1 and key in (f.warning[0], "?")
        if printed:
            f.logged_open = line
        elif f.logged and line - f.logged[-1][1] <= x.CHAIN_GAP:
            f.logged_open = f.logged[-1][0]
        if x.json_traceback_end(text) is not None:  # a JSON record holds the whole traceback: its end too
            col.exception(line, text, who, key)
    else:
        col.exception(line, text, who, key)


def _watchdog(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    f = col.file
    assert f is not None
    if "Watchdog caught" in text:
        col.timeout(line, text, who)
    elif f.pending_watchdog and "WorkNCCL(" in text and line - f.pending_watchdog[1] <= 3:
        t_key = f.pending_watchdog[0]
        m = x.WORK.search(text)
        for k, t in col.timeouts.items():
            if k[0] == t_key and t.line == f.pending_watchdog[1] and t.file == f.name and m:
                t.op = t.op or m.group("op")
                t.seq = t.seq if t.seq is not None else _int(m.group("seq"))
        f.pending_watchdog = None


def _work_status(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    m = x.WORK_STATUS.search(text)
    if m and key != "?":
        col.work_status[key] = (int(m.group("enq")), int(m.group("done")))


def _nccl_version(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    m = x.NCCL_VERSION.search(text)
    if m:
        if key == "?":  # NCCL's bare VERSION line: the process whose INFO lines just led to it
            key, who = _printing_process(col, line) or (key, who)
        col.fact(key, "nccl_version", m.group("version"), line, text, who)
        if m.group("cuda"):
            col.fact(key, "nccl_cuda", m.group("cuda"), line, text, who)


def _printing_process(col: Collector, line: int) -> tuple[str, x.Who] | None:
    """The process of the closest fact line before `line` in this file, within VERSION_SPAN lines.

    NCCL prints `NCCL version X` with no host:pid prefix at NCCL_DEBUG=VERSION or WARN, and some
    releases at INFO too, right after that process's `Bootstrap : Using` and `cudaDriverVersion` INFO
    lines: the prefixed line just before names who printed it. None when no such line is that close
    (the version then stays unattributed and compares with nothing)."""
    name = col.file.name
    best = None
    for (key, _fact), hit in col.fact_lines.items():
        if hit.file == name and hit.proc and line - VERSION_SPAN <= hit.line < line and (best is None or hit.line > best[1].line):
            best = (key, hit)
    return None if best is None else (best[0], x.Who(best[1].rank, best[1].proc, None))


def _gpu(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    m = x.GPU_MODEL.search(text)
    if m and len(col.gpus[m.group("m")]) < MAX_HITS:
        col.gpus[m.group("m")].append(col.hit("x-gpu-model", line, text, who))
    t = x.NCCL_TESTS_RANK.match(text)
    if t:
        col.rank_hosts[t.group("rank")] = t.group("host")


def _topo_row(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    m = x.TOPO_ROW.match(text)
    if m:
        link = "nvlink" if "NV" in m.group("cells") else "pcie"
        col.fact(key, "topo:GPU" + m.group("i"), link, line, text, who)


def _cuda_driver(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    m = x.CUDA_DRIVER.search(text)
    if m:
        col.fact(key, "cuda_driver", m.group("d"), line, text, who)


def _using(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    m = x.USING.search(text)
    if not m:
        return
    what, rest = m.group("what"), m.group("rest")
    if what == "NET/IB":
        devs = x.IB_DEV.findall(rest)
        if devs:
            col.fact(key, "ib", ",".join(f"{d}/{k}" for d, k in devs), line, text, who)
        return
    ifs = x.interfaces(rest)
    if ifs:
        name, addr = ifs[0]
        col.fact(key, "bootstrap_if" if what == "Bootstrap" else "net_if", f"{name}:{addr}", line, text, who)


def _network(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    m = x.NET_NAME.search(text)
    if m:
        col.fact(key, "network", m.group("net").strip(), line, text, who)


def _no_ib(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    col.fact(key, "ib", "none", line, text, who)


def _channel(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    m = x.CHANNEL.search(text)
    if m:
        col.channels[key].add(x.channel_kind(m))


def _comm_rank(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    m = x.COMM_RANK.search(text)
    if m and who.proc:
        n, r = int(m.group("n")), m.group("rank")
        if n > col.proc_rank.get(who.proc, (0, ""))[0]:  # the first of the widest comm
            col.proc_rank[who.proc] = (n, r)
        col.world = max(col.world, n)


def _nodes(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    m = x.NNODES.search(text)
    if m:
        col.nodes = max(col.nodes, int(m.group("n")))


def _env(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    m = x.ENV_SET.search(text)
    if m:
        col.fact(key, "env:" + m.group("name"), m.group("value"), line, text, who)


def _elastic(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    col.elastic(line, text)


def _elastic_exit(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    m = x.ELASTIC_EXIT.search(text)
    if m and who.rank is not None:
        col.elastic_exits.setdefault(who.rank, (int(m.group("code")), col.hit("x-exit", line, text, who)))


def _announce(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    m = x.ANNOUNCE.search(text)
    if m:
        r = m.group("a") or m.group("b") or m.group("c")
        col.announce[r].append(col.hit("x-announce", line, text, who))
        if m.group("w"):
            col.world = max(col.world, int(m.group("w")))
            if who.rank is not None:
                col.worlds.setdefault(who.rank, int(m.group("w")))


def _world(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    m = x.WORLD.search(text)
    if m:
        n = int(m.group("w") or m.group("w2"))
        if m.group("r") is None or int(m.group("r")) < n:  # "rank 3/2" is no world size
            col.world = max(col.world, n)
            if who.rank is not None:
                col.worlds.setdefault(who.rank, n)


def _backward(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    # a traceback through autograd's engine waits in DDP's gradient all-reduce: a collective of
    # its own, which an explicit all_reduce on another rank cannot pair with
    if len(col.ops["ddp-backward"]) < MAX_HITS:
        col.ops["ddp-backward"].append(col.hit("x-collective", line, text, who))


def _collective(col: Collector, line: int, text: str, who: x.Who, key: str) -> None:
    for m in list(x.FRAME.finditer(text)) + list(x.CALL.finditer(text)):
        op = x.collective_op(m.group("op"))
        if op and len(col.ops[op]) < MAX_HITS:
            col.ops[op].append(col.hit("x-collective", line, text, who))


def _int(s: str | None) -> int | None:
    return int(s) if s is not None else None


# In the order they run on a line (the warning before the traceback test that reads it).
TABLE: tuple[Extractor, ...] = (
    Extractor("x-sample-ids", ("ids", "indices"), EVENT, _sample_ids,
              r"ids \[|ids: \[|ids=\[|indices \[|indices: \[|indices=\["),
    Extractor("x-epoch-size", (" batches",), FACT, _epoch_size, r"\d batches"),
    Extractor("x-spawn-exit", ("terminated with",), EVENT, _spawned,
              r"terminated with (?:the following error|exit code|signal)"),
    # a traceback frame: the user's own code in it is the culprit's location
    Extractor("x-user-frame", ('", line ',), EVENT, _user_frame, r'File "[^"]+", line \d+, in '),
    Extractor("x-named-late", ("monitoredBarrier",), EVENT, _named_late),
    # a store wait that gave up: the exception line that lists the keys, or a "Socket Timeout"
    # after a store frame (the frames come with x-user-frame's lines, "Socket Timeout" with a signature's)
    Extractor("x-store-wait", ("ait timeout", "key(s)", "Socket Timeout", "TCPStore::", "store.wait(",
                               "store.get(", "_store_based_barrier", "utils/store.py", "Exception raised from "),
              EVENT, _store_wait, r"ait timeout after \d+ ?ms, keys|Wait timeout for key\(s\)|\bstore\.(?:wait|get)\("
              r"|in _store_based_barrier\b|Exception raised from \w+ at "),
    # a logging record at WARNING level may print the traceback after it (logged, not raised)
    Extractor("x-log-warning", ("WARNING",), EVENT, _warning, r"WARNING"),
    Extractor("x-exception", (x.TRACEBACK, "Error", "Exception", "Interrupt", "Failure"), EVENT,
              _traceback_or_exception,
              r"Error: |Exception: |KeyboardInterrupt|Failure: |Traceback \(most recent call last\)"),
    Extractor("x-workncl", ("Watchdog caught", "WorkNCCL("), EVENT, _watchdog, r"WorkNCCL\("),
    Extractor("x-work-status", ("last enqueued NCCL work",), EVENT, _work_status),
    Extractor("x-nccl-version", ("NCCL version",), FACT, _nccl_version, r"NCCL version \d"),
    # GPU listings: one line a GPU
    Extractor("x-gpu-model", ("NVIDIA ", "Tesla ", "Quadro ", "TITAN ", "GeForce "), EVENT, _gpu,
              r"NVIDIA [A-Z]|Tesla [A-Z]\d|Quadro |TITAN |GeForce [A-Z]"),
    # a pasted `nvidia-smi topo -m`: one fact a GPU row, its links PCIe only or with NVLink
    Extractor("x-topo-row", ("GPU",), EVENT, _topo_row, r"^\s*GPU\d{1,3}\s+(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)\s",
              x.TOPO_ROW),
    Extractor("x-cuda-driver", ("cudaDriverVersion",), FACT, _cuda_driver, r"cudaDriverVersion \d"),
    Extractor("x-using", (": Using ",), FACT, _using, r"(?:Bootstrap|NET/Socket|NET/IB|NET) ?: Using "),
    Extractor("x-network", ("Using network",), FACT, _network, r"Using network \w"),
    Extractor("x-no-ib", ("NET/IB : No device found",), FACT, _no_ib, r"NET/IB : No device found"),
    Extractor("x-channel", (" via ",), FACT, _channel),  # brought by scan's channel sampling
    Extractor("x-comm-rank", ("anks ",), FACT, _comm_rank, r"rank \d+ nr?[Rr]anks \d+"),
    Extractor("x-nnodes", ("nNodes",), FACT, _nodes),
    Extractor("x-env", ("set by environment to",), FACT, _env, r"set by environment to"),
    Extractor("x-elastic-rank", ("local_rank",), EVENT, _elastic, r"\(local_rank: \d|local_rank: \d+ \(pid"),
    Extractor("x-exit", ("exitcode",), EVENT, _elastic_exit),
    Extractor("x-announce", ("rank", "RANK"), EVENT, _announce,
              r"distributed init \(rank|GLOBAL_RANK: \d|to store for rank: \d", x.ANNOUNCE),
    Extractor("x-world", ("rank ", "world_size", "world size", "WORLD_SIZE"), FACT, _world,
              r"rank \d+ ?(?:/|of) ?\d|world[_ ]size[=: ]{1,3}\d|WORLD_SIZE[=: ]{1,3}\d"),
    # where each rank says it resumed (the resume signatures bring some phrasings; this one the rest)
    Extractor("x-resume", ("esum", "estor", "ed checkpoint", "ing checkpoint"), EVENT, _resume,
              r"[Rr]esum(?:ed|ing|e)\b.{0,160}\d|[Rr]estor(?:ed|ing)\b.{0,60}(?:checkpoint|state)"
              r"|[Ll]oad(?:ed|ing) checkpoint", x.RESUME_LINE),
    Extractor("x-backward", ("in _engine_run_backward",), EVENT, _backward, r"in _engine_run_backward"),
    Extractor("x-collective", ("distributed", "default_pg"), EVENT, _collective,
              r'distributed_c10d\.py", line|torch\.distributed\.\w+\('),
)

EVENTS: tuple[Extractor, ...] = tuple(e for e in TABLE if e.repeats == EVENT)
FACT_WORDS: tuple[str, ...] = tuple(w for e in TABLE if e.repeats == FACT for w in e.words)


def event(text: str) -> bool:
    """Whether an extractor records something a repeat of this line would change."""
    return any(e.event(text) for e in EVENTS)
# the prefilter's patterns for lines that no signature brings
TRIGGERS: tuple[tuple[str, str], ...] = tuple((e.id, e.trigger) for e in TABLE if e.trigger)
