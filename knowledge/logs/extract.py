"""Line-level extractors: rank attribution, timestamps, watchdog records and NCCL INFO facts."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from .. import nccl_grammar as grammar
from ..frozen import Frozen, frozen
from ..lazyre import lazy

# ------------------------------------------------------------------ rank attribution
# Prefixes launchers put in front of every line: torchrun (--tee / log_line_prefix) `[rank3]:`,
# `[default3]:`; srun --label `3: `; mpirun --tag-output `[1,3]<stdout>:`; NCCL without a host
# (older builds, bundled copies) `[3] ... NCCL`.
_PREFIX = lazy(
    r"^(?:\s*\x1b\[[0-9;]*m)?\s*(?:"
    r"\[(?:rank|default|trainer)(?P<a>\d+)\]:"
    r"|\[rank ?(?P<d>\d+)\] "
    r"|\[\d+,(?P<b>\d+)\]<std(?:out|err)>:"
    r"|(?P<c>\d{1,6}): "
    r")")
_GLOBAL_AFTER = lazy(r"\[rank(?P<r>\d+)\]:")
# NCCL's line header and version banner, from the one grammar (knowledge/nccl_grammar.py)
_NCCL_HOST = lazy(r"(?:^|\s|\])(?=[\w.\-])" + grammar.ORIGIN + " " + grammar.DEVICE)  # a host is named
_NCCL_BARE = lazy(r"^\s*" + grammar.DEVICE + " " + grammar.SOURCE + "NCCL ")  # no host: '[3] NCCL ...'

# inside the line: `[Rank 3]`, `[PG 0 Rank 3]`, `global_rank=3`, and structured logging's key=value
# tags `rank=3`, `rank: 3` (never `local_rank=`, `nranks=`, `group_rank=`: a word before it)
_IN_TEXT = lazy(r"\[(?:PG [^\]]*?)?Rank ?(?P<r>\d+)\]|\bglobal[_ ]rank[=: ]+(?P<g>\d+)"
                      r"|(?<![\w.-])rank ?[=:] ?(?P<k>\d+)(?=[\s,;|\])}]|$)", re.I)
_FILE_RANK = lazy(r"(?:^|[^a-z])(?:rank|task|proc|worker|node_rank|local_rank)[-_.]?(\d+)(?:\D|$)", re.I)
_ELASTIC_DIR = lazy(r"attempt_\d+[/\\](\d+)[/\\](?:error\.json|stdout\.log|stderr\.log)$")


def file_rank(path: str) -> str | None:
    """The rank a file belongs to, from names like `job-rank3.log`, `task-3.out`, attempt_0/3/."""
    m = _ELASTIC_DIR.search(path)
    if m:
        return m.group(1)
    m = _FILE_RANK.search(os.path.basename(path))
    return m.group(1) if m else None


@frozen
class Who(Frozen):
    """Who wrote a line: a rank (when known) and the NCCL process (host:pid) when printed."""

    rank: str | None
    proc: str | None
    host: str | None
    tag: bool = False  # the rank came from a key=value tag in the text (`rank=3`): a file of one rank wins
    local: bool = False  # the rank came from torchrun's role prefix (`[default1]:`): the agent's LOCAL rank


# What loggers put before a line's own text: moreutils' `ts` ("Dec 02 11:02:24.238283 "), an ISO
# date ("2026-12-02 11:02:27,475 ", "[2026-12-02T11:02:27Z] "), and glog's header, which torch's
# C++ logging and torchrun's agent print ("E1202 12:00:01.123456 1234 torch/path.py:123] ", older
# releases "[E ProcessGroupNCCL.cpp:828] "). The line's own text follows, launcher prefixes included.
LEAD = (r"(?:\s*(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d{1,9})?"
        r"|\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\]?"
        r"|\[?[IWEF]\d{4} \d\d:\d\d:\d\d(?:\.\d{1,9})? +\d+ [^\]\s]{1,300}:\d+\]"
        r"|\[[IWEF] [\w.]{1,100}:\d+\])(?: |$))")
_LEAD = lazy(r"^" + LEAD + "+")
_LEAD_START = frozenset("ADFIJMNOSWE[0123456789 ")  # month names, years, glog severities, brackets


def strip_lead(text: str) -> str:
    """The line without the timestamps and glog headers in front of it (unchanged when none)."""
    if text[:1] not in _LEAD_START:
        return text
    m = _LEAD.match(text)
    return text[m.end():] if m else text


def who(text: str) -> Who:
    rank = proc = host = None
    tag = False
    src = text
    local = False
    m = _PREFIX.match(text)
    if m is None:
        lead = strip_lead(text)
        if lead is not text:
            src, m = lead, _PREFIX.match(lead)
    if m:
        rank = m.group("a") or m.group("b") or m.group("c") or m.group("d")
        if m.group("a") is not None and "[rank" not in m.group(0):
            # torchrun's role prefix `[default1]:` is the LOCAL rank; torch's own `[rank3]:` after it
            # (an uncaught exception's lines) is the global one: they differ on every node but the first
            inner = _GLOBAL_AFTER.match(src, m.end())
            if inner:
                rank = inner.group("r")
            else:
                local = not m.group(0).lstrip().startswith("[rank")
    h = _NCCL_HOST.search(text, 0, 200)
    if h:
        host = h.group("host")
        proc = f"{host}:{h.group('pid')}"
    elif rank is None:
        b = _NCCL_BARE.match(strip_lead(text))
        if b:
            rank = b.group("dev")
    if rank is None:
        t = _IN_TEXT.search(text)
        if t:
            rank = t.group("r") or t.group("g") or t.group("k")
            tag = t.group("k") is not None
    return Who(rank, proc, host, tag, local)


# torchrun's failure summary, one entry a worker: "rank      : 2 (local_rank: 0)"
_SUMMARY_RANK = re.compile(rb"\brank\s*: (\d{1,6}) \(local_rank: (\d{1,6})\)")


def local_ranks(tail: bytes) -> dict[str, str]:
    """local rank -> global rank, from torchrun's failure summary at the end of one node's console,
    when they differ (every node but the first): its `[defaultN]:` prefixes are local ranks. {}
    when the summary is absent, when every local rank is the global one, or when one local rank
    has two global ones (several nodes' consoles in one file: its prefixes cannot tell them apart)."""
    found = {(loc.decode(), glob.decode()) for glob, loc in _SUMMARY_RANK.findall(tail)}
    pairs = dict(found)
    if len(pairs) < len(found) or all(g == loc for loc, g in pairs.items()):
        return {}
    return pairs


# ------------------------------------------------------------------ timestamps
_ISO = lazy(r"(\d{4})-(\d\d)-(\d\d)[ T_](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")
_GLOG = lazy(r"\[?[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?")


_DAYS_BEFORE_MONTH = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)
_EPOCH_DAYS = 719162  # days from 0001-01-01 to 1970-01-01


def utc_seconds(y: int, mo: int, d: int, h: int, mi: int, s: int) -> int:
    """calendar.timegm((y, mo, d, h, mi, s)) without importing calendar and datetime (~2 ms of
    each start): the same ValueError for a year outside 1-9999 or a month outside 1-12, and, like
    it, no check of the day, hour, minute or second."""
    if not (1 <= y <= 9999 and 1 <= mo <= 12):
        raise ValueError(f"date out of range: {y}-{mo}")
    p = y - 1
    leap = mo > 2 and y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    days = p * 365 + p // 4 - p // 100 + p // 400 + _DAYS_BEFORE_MONTH[mo - 1] + leap + d - 1 - _EPOCH_DAYS
    return ((days * 24 + h) * 60 + mi) * 60 + s


def timestamp(text: str) -> tuple[int, float] | None:
    """(kind, seconds): kind 2 is a full date, 1 a glog time without the year; None if absent."""
    head = text[:160]
    m = _ISO.search(head)
    if m:
        y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
        frac = float("0." + m.group(7)) if m.group(7) else 0.0
        try:
            return 2, utc_seconds(y, mo, d, h, mi, s) + frac
        except ValueError:
            return None
    g = _GLOG.search(head)
    if g:
        mo, d, h, mi, s = (int(x) for x in g.groups()[:5])
        frac = float("0." + g.group(6)) if g.group(6) else 0.0
        return 1, ((mo * 31 + d) * 24 + h) * 3600 + mi * 60 + s + frac
    return None


# ------------------------------------------------------------------ watchdog
WATCHDOG = lazy(r"Watchdog caught collective operation timeout")
WORK = lazy(r"WorkNCCL\((?:SeqNum=(?P<seq>\d+))?[^)]*?OpType=(?P<op>\w+)")
PG = lazy(r"\[PG (?:ID )?(?P<pg>\d+)")
WORK_STATUS = lazy(r"last enqueued NCCL work: (?P<enq>-?\d+), last completed NCCL work: (?P<done>-?\d+)")


@dataclass
class Timeout:
    """A watchdog timeout: the collective's SeqNum and op, its process group, and the line it was read from."""

    seq: int | None
    op: str | None
    pg: str
    file: str
    line: int
    text: str
    ts: tuple[int, float] | None


# ------------------------------------------------------------------ NCCL INFO facts
NCCL_VERSION = grammar.VERSION_RX
CUDA_DRIVER = lazy(r"cudaDriverVersion (?P<d>\d+)")
USING = lazy(r"(?P<what>Bootstrap|NET/Socket|NET/IB|NET) ?: Using (?:interface )?(?P<rest>.*)")
IFACE = lazy(r"(?:\[\d+\])?(?P<name>[A-Za-z][\w.@-]*):(?P<addr>[0-9a-fA-F.:%\w-]+?)<\d+>")
IB_DEV = lazy(r"\[\d+\](?P<dev>[\w-]+):\d+/(?P<kind>IB|RoCE|\w+)")
NET_NAME = lazy(r"Using network (?P<net>\w[\w ]*?)\s*$")
CHANNEL = lazy(r" via (?P<t>P2P|SHM|NET|direct shared memory|CollNet\w*)(?:/(?P<sub>\w+))?")
COMM_RANK = lazy(r"comm 0x[0-9a-f]+ rank (?P<rank>\d+) nr?[Rr]anks (?P<n>\d+)")
NNODES = lazy(r"nNodes (?P<n>\d+)")
ENV_SET = grammar.ENV_SET_RX
# GPU models as the common listings print them: collect_env's "GPU 0: NVIDIA ...", nvidia-smi's
# table, Lightning's environment dump, nccl-tests' "#  Rank  0 [Group  0] Pid  N on HOST device  0
# [0x01] NVIDIA RTX A6000" (which also gives every rank's host: it lists the whole world). Drivers
# and CUDA samples before 2021 name consumer boards without the vendor ("GeForce GTX 1080 Ti" in
# nvidia-smi's table, p2pBandwidthLatencyTest's "Device: 0, GeForce GTX 1080 Ti, pciBusID: 2").
GPU_MODEL = lazy(r"\b(?P<m>(?:NVIDIA |Tesla |Quadro |TITAN |GeForce )[\w -]*?\w)(?:\s*(?:\||,|\(|Off\b|On\b|$))")
NCCL_TESTS_RANK = lazy("^" + grammar.TESTS_RANK_DEVICE)
# Boards whose GPUs talk over PCIe only (no NVLink switch; at most a 2-way bridge): consumer
# GeForce/TITAN, workstation Quadro and RTX A/Ada, PCIe Tesla and the PCIe data-centre cards.
# NCCL's peer-to-peer between them goes over PCIe, where it is absent, disabled by the driver
# (GeForce RTX 40) or broken by ACS/IOMMU (GUIDE 2.4, 5).
PCIE_GPU = lazy(r"GeForce|TITAN|Quadro|RTX A\d|RTX \d{4}|Tesla [KMPT]\d|\b(?:A10|A16|A2|A40|L4|L40S?|T4)\b")
# a GPU row of `nvidia-smi topo -m` pasted with the log: its link cells up to the affinity columns
# (NIC columns carry PCIe codes too; NV# appears only between GPUs joined by NVLink)
TOPO_ROW = lazy(r"^\s*GPU(?P<i>\d{1,3})\s+(?P<cells>(?:(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)\s+)+)")
VIRTUAL_IF = lazy(r"^(?:lo|docker\d*|virbr\d*|veth\w*|br-[0-9a-f]+|cni\d*|flannel[\w.]*|cali\w+)$")
UNROUTABLE_ADDR = lazy(r"^(?:127\.|169\.254\.|::1$|fe80:)")


def channel_kind(m: re.Match) -> str:
    t, sub = m.group("t"), m.group("sub")
    if t == "direct shared memory":
        return "SHM"
    if t == "NET" and sub:
        return "NET/" + re.sub(r"_?v\d+$", "", sub)
    return t


def interfaces(rest: str) -> list[tuple[str, str]]:
    """(name, address) pairs from the text after `: Using`."""
    return [(m.group("name"), m.group("addr")) for m in IFACE.finditer(rest.split(";")[0])]


# ------------------------------------------------------------------ torchelastic and launch
# the summary's lines may come after a timestamp or a glog header (LEAD) when a console is stamped
ELASTIC_RANK = lazy(r"^" + LEAD + r"*\s*rank\s*:\s*(?P<rank>\d+) \(local_rank: (?P<local>\d+)\)")
ELASTIC_EXIT = lazy(r"exitcode\s*:\s*(?P<code>-?\d+)")
ELASTIC_ONE_LINE = lazy(r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local>\d+)")
ELASTIC_TIME = lazy(r"^" + LEAD + r"*\s*time\s*:\s*(?P<t>\d{4}-\d\d-\d\d_\d\d:\d\d:\d\d)")
ANNOUNCE = lazy(r"distributed init \(rank (?P<a>\d+)\)|GLOBAL_RANK: (?P<b>\d+), MEMBER: \d+/(?P<w>\d+)"
                      r"|to store for rank: (?P<c>\d+)")

# How many ranks the job has, as scripts and launchers print it: "rank 1/4", "rank 1 of 4",
# "world_size=4", "WORLD_SIZE=4", "world size: 4" (never "local_rank 1/4": a word before it)
WORLD = lazy(r"(?<![\w.-])rank (?P<r>\d{1,6}) ?(?:/|of) ?(?P<w>\d{1,6})\b|\b(?:world[_ ]size|WORLD_SIZE)[=: ]{1,3}(?P<w2>\d{1,6})\b")

# ------------------------------------------------------------------ collectives in tracebacks
FRAME = lazy(r'distributed_c10d\.py", line \d+, in (?P<op>\w+)')
CALL = lazy(r"(?:torch\.distributed|\bdist|default_pg|\bgroup|\bpg)\.(?P<op>\w+)\(")
_OPS = {
    "all_reduce": "allreduce", "allreduce": "allreduce", "broadcast": "broadcast",
    "barrier": "barrier", "monitored_barrier": "barrier", "all_gather": "allgather",
    "allgather": "allgather", "all_gather_into_tensor": "allgather", "_all_gather_base": "allgather",
    "reduce_scatter": "reducescatter", "reduce_scatter_tensor": "reducescatter",
    "_reduce_scatter_base": "reducescatter", "gather": "gather", "scatter": "scatter",
    "reduce": "reduce", "all_to_all": "alltoall", "all_to_all_single": "alltoall",
    "alltoall": "alltoall", "alltoall_base": "alltoall",
}


def collective_op(name: str) -> str | None:
    """The collective a traceback frame or call names (object variants count as their base)."""
    return _OPS.get(name)


# ------------------------------------------------------------------ progress (tail only)
PROGRESS = lazy(r"\b(?P<kind>step|iteration|iter|batch)\b\s*[:=#]?\s*(?P<n>\d+)", re.I)
LOSS = lazy(r"\bloss\b\s*[:=]?\s*(?P<v>-?\d+\.\d{3,})", re.I)
# Where a rank says it resumed, in the common phrasings: "Resuming from checkpoint /ckpt/step-1000",
# "resumed at epoch 3, step 1200", Lightning's "Restored all states from the checkpoint at
# ck/epoch=3-step=1200.ckpt", Megatron's "loading checkpoint from /ckpt at iteration 500".
RESUME_LINE = lazy(r"[Rr]esum(?:ed|ing|e)\b|[Rr]estor(?:ed|ing)\b.{0,60}(?:checkpoint|state)"
                         r"|[Ll]oad(?:ed|ing) checkpoint")
RESUME_EPOCH = lazy(r"\bepoch[ =:_-]{0,3}(?P<n>\d+)", re.I)
RESUME_AT = lazy(r"(?:global_step|\bstep|\biter(?:ation)?|checkpoint)[ =:_-]{0,3}(?P<n>\d+)", re.I)


def resume_point(text: str) -> tuple[int | None, int | None] | None:
    """(epoch, step) a resume line names (either may be None), or None when it names neither."""
    if RESUME_LINE.search(text) is None:
        return None
    e, s = RESUME_EPOCH.search(text), RESUME_AT.search(text)
    if e is None and s is None:
        return None
    return (int(e.group("n")) if e else None, int(s.group("n")) if s else None)


def resume_text(point: tuple[int | None, int | None]) -> str:
    """`epoch 3 step 1200`, `step 1000`, `epoch 3`."""
    return " ".join(f"{k} {v}" for k, v in zip(("epoch", "step"), point) if v is not None)


# ------------------------------------------------------------------ Python exceptions
# The last line of a Python traceback, after any launcher prefixes: `ValueError: bad record`,
# `torch.distributed.DistBackendError: ...`, `KeyboardInterrupt`. Warnings are not failures.
_PREFIXES = lazy(r"^(?:\s*(?:\[(?:rank|default|trainer)\d+\]:|\[rank ?\d+\] |\[\d+,\d+\]<std(?:out|err)>:|\d{1,6}: ))+")
EXCEPTION = lazy(
    r"^(?:[A-Za-z_]\w*\.)*(?P<type>[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure|Failed))"
    r"(?::\s?(?P<msg>.*))?$")
TRACEBACK = "Traceback (most recent call last)"
# A logging record at WARNING level (Python's levelname; NCCL's own "NCCL WARN" is not one): when a
# traceback follows it on the next line, logging printed it (exc_info): the code caught the
# exception and went on. An uncaught one is printed by sys.excepthook with no record before it.
LOG_WARNING = lazy(r"(?:^|[\s\[|:-])WARNING(?:[\]\s:|-]|$)")
CHAIN_GAP = 4  # "During handling of the above exception..." between two tracebacks of one chain
# An exception that reports losing a peer or waiting out a timeout: the rank that raised it was
# left behind by another one (Gloo's "This is typically caused by a remote worker crashing",
# NCCL's remote errors, the watchdog), so it is a waiter's symptom, never the root failure.
PEER_LOSS = lazy(
    r"Connection closed by peer|Connection reset by peer|remote worker crash|remote process exited"
    r"|ncclRemoteError|Broken pipe|[Tt]imed out|[Ww]atchdog caught|Socket Timeout|Timeout\(ms\)"
    r"|[Ww]ait timeout|clients joined|failed to pass monitoredBarrier|successfully reached monitoredBarrier"
    r"|NCCL communicator was aborted|ProcessGroup\w* is aborted|peer .*(?:closed|reset)")
# Exceptions the launcher raises in its own process when a worker fails or it is told to stop.
TIMED_OUT = lazy(r"[Tt]imed out|[Ww]atchdog caught|Socket Timeout|Timeout\(ms\)|timeout|monitoredBarrier")
# The waiters name the late rank: monitored_barrier on rank 0 lists the ranks that did not arrive
# ("[Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms", "Ranks 1, 2 failed to pass
# monitoredBarrier in 120000 ms" with wait_all_ranks). The rank that raises it is a waiter.
NAMED_LATE = lazy(r"Ranks? (?P<ranks>\d+(?:, ?\d+)*) failed to pass monitoredBarrier")
# The rendezvous store's wait gave up (TCPStore.cpp doWait; store.get waits for its key first):
# torch 2.x "DistStoreError: wait timeout after 10000ms, keys: /a/rank0, /a/rank1", Gloo's own
# stores "Wait timeout for key(s): [k0, k1]", older torch a bare "Socket Timeout" from doWait. The
# store answered, so it is a wait for a key another rank writes, not a network fault.
STORE_WAIT = lazy(r"(?:(?:\bdoWait|\b[Ww]ait) timeout after \d+ ?ms, keys|Wait timeout for key\(s\)): ?\[?(?P<keys>[^\]]{1,4000})")
# a frame of a store wait or get in the traceback before a bare "Socket Timeout"
STORE_FRAME = lazy(r"TCPStore::(?:doWait|wait|doGet|get)\b|\bstore\.(?:wait|get)\(|in _store_based_barrier\b"
                         r"|elastic/utils/store\.py\"")
# c10::Error prints where it was raised after its message ("Socket Timeout\nException raised from
# doWait at ../torch/csrc/distributed/c10d/TCPStore.cpp:445 (most recent call first):"): the
# message just before this line came from the store's wait or get
RAISED_IN_STORE = lazy(r"Exception raised from (?:doWait|wait|doGet|get|waitForInput)\b.{0,20} at \S*(?:TCPStore|socket)\.cpp:")
# a key that names the rank that writes it: `/index/rank1`, `rank_3`, `ready/worker-2`
KEY_RANK = lazy(r"(?:^|[/_.:-])(?:rank|worker)[_-]?(?P<r>\d{1,6})$", re.I)
# Gloo's full-mesh address keys under ProcessGroupGloo's device prefix (`/default_pg/0//cpu//0/2`:
# rank 2's address), which every rank waits for alike at init
GLOO_KEY_RANK = lazy(r"//(?:cpu|cuda)//\d{1,3}/(?P<r>\d{1,6})$")


def store_keys(text: str) -> tuple[str, ...] | None:
    """The keys a store wait gave up on (empty when the message lists none), or None."""
    m = STORE_WAIT.search(text)
    if m is None:
        return None
    return tuple(k.strip(" '\"") for k in re.split(r",\s*|\s+", m.group("keys").strip()) if k.strip(" '\""))


def key_rank(key: str, gloo: bool = False) -> str | None:
    """The rank a store key names by its suffix (`/index/rank1` -> 1), else None; with gloo, also
    the rank of a Gloo address key (`/default_pg/0//cpu//0/2` -> 2)."""
    m = KEY_RANK.search(key) or (GLOO_KEY_RANK.search(key) if gloo else None)
    return str(int(m.group("r"))) if m else None


# A traceback frame ('  File "train.py", line 25, in main'); the user's own code is any file
# outside the interpreter, site-packages and torch itself
FRAME_ANY = lazy(r'File "(?P<path>[^"]{1,400})", line (?P<line>\d+), in (?P<fn>[\w<>.]{1,80})')
LIBRARY = ("site-packages", "dist-packages", "/lib/python", "<frozen", "lib\\python", "/torch/")


def user_frame(text: str) -> str | None:
    """'train.py:25 in main' for a frame of the user's own code, else None."""
    m = FRAME_ANY.search(text)
    if m is None or any(p in m.group("path") for p in LIBRARY):
        return None
    name = re.split(r"[/\\]", m.group("path"))[-1]
    return f"{name}:{m.group('line')} in {m.group('fn')}"


# A pasted excerpt quoted in Markdown or e-mail ("> [rank1]: ...")
QUOTE = lazy(r"^(?:> ?)+")
LAUNCHER_EXC = frozenset({"ChildFailedError", "SignalException", "ProcessRaisedException",
                          "ProcessExitedException", "KeyboardInterrupt", "SystemExit"})


# glog's header of torchrun's own agent (torch/distributed/elastic/...): what it logs is the
# launcher's record (an exit barrier it gave up, a rendezvous it retried), never a rank's failure
AGENT_HEADER = lazy(r"^\s*\[?[IWEF]\d{4} [\d:.]+ +\d+ [^\]\s]*torch/distributed/(?:elastic|run\.py)[^\]\s]*\]")


# the end of a JSON string: the first quote no backslash escapes
_JSON_STR = lazy(r'(?:[^"\\]|\\.)*')


def json_traceback_end(text: str) -> str | None:
    """The last line of a traceback that a JSON record holds in one string field (logging's JSON
    formatters escape its newlines: `"exc": "Traceback (most recent call last):\\n ...\\nValueError:
    x\\n"`), unescaped; None when the line is no such record."""
    i = text.rfind(TRACEBACK)
    if text.lstrip()[:1] != "{" or i < 0 or "\\n" not in text[i:]:
        return None
    for part in reversed(text[i:].split("\\n")):
        body = _JSON_STR.match(part).group(0).replace('\\"', '"').replace("\\\\", "\\").strip()  # type: ignore[union-attr]
        if body:
            return body
    return None


def exception(text: str) -> tuple[str, str] | None:
    """(type, message) when the line is the last line of a traceback, else None (also for a
    traceback torchrun's agent logged under its glog header: the launcher's own record). A JSON
    record holding a whole traceback reads as that traceback's last line."""
    if text[:1] in "IWEF[ " and AGENT_HEADER.match(text):
        return None
    if text[:1] == "{" or text[:1] == " " and text.lstrip()[:1] == "{":
        text = json_traceback_end(text) or text
    text = strip_lead(text)
    body = _PREFIXES.sub("", text, count=1) if text[:1] in "[0123456789 " else text
    body = strip_lead(body).strip()  # a glog header after the launcher's prefix
    if len(body) > 2000 or ": " not in body and not body.endswith(":") and not body[-1:].isalpha():
        return None
    m = EXCEPTION.match(body)
    if m is None:
        return None
    return m.group("type"), (m.group("msg") or "").strip()


# What a rank was doing, from the words of its own lines (phase of the timeline).
PHASES = (
    ("teardown", lazy(r"destroy_process_group|training (?:finished|complete|done)|Training completed", re.I)),
    # saving, and writing a cache of prepared data (tokenised features, latents) to disk
    ("save", lazy(r"\bsav(?:e|ing)\b.*(?:checkpoint|model|state)|torch\.save|save_checkpoint"
                  r"|\bcache\b.{0,60}\b(?:written|writing|built|building|saved)\b"
                  r"|\b(?:writing|building|saving)\b.{0,60}\bcache\b", re.I)),
    ("load", lazy(r"\bload(?:ing)?\b.*(?:checkpoint|state|shard)|resum(?:e|ing) from", re.I)),
    ("eval", lazy(r"\b(?:eval(?:uat\w*)?|validat\w+)\b", re.I)),
    ("dataloader", lazy(r"DataLoader|dataloader|_MultiProcessingDataLoaderIter|__getitem__")),
    ("init", lazy(r"init_process_group|rendezvous|Rendezvous|TCPStore|NCCL INFO (?:Bootstrap|comm 0x|Init)")),
)


# Each phase's pattern needs one of its words (lower-cased for the re.I ones): most lines have
# none, and six case-insensitive searches per line cost ~20 us.
_PHASE_WORDS = {
    "teardown": (("destroy_process_group", "training"), ()), "save": (("sav", "cache"), ()),
    "load": (("load", "resum"), ()), "eval": (("eval", "validat"), ()),
    "dataloader": ((), ("DataLoader", "dataloader", "__getitem__")),
    "init": ((), ("init_process_group", "endezvous", "TCPStore", "NCCL INFO ")),
}


_PHASE_ANY = tuple({w.lower() for lower, cased in _PHASE_WORDS.values() for w in lower + cased}) \
    if all(name in _PHASE_WORDS for name, _rx in PHASES) else ("",)  # a phase without words: no shortcut


def phase(text: str) -> str | None:
    if text.isascii():  # lower() folds case as re.I does for ASCII only
        low = text.lower()
        if not any(w in low for w in _PHASE_ANY):  # most lines: none of any phase's words
            return None
        for name, rx in PHASES:
            lower, cased = _PHASE_WORDS.get(name, ((), ("",)))  # a phase not listed: always searched
            if (any(w in low for w in lower) or any(w in text for w in cased)) and rx.search(text):
                return name
        return None
    for name, rx in PHASES:
        if rx.search(text):
            return name
    return None


# What a rank says it is reading: `first sample ids [56, 264, 149]`, `batch indices: [3, 7]`.
SAMPLE_IDS = lazy(r"(?:sample|example|batch|item|cut)s? ?(?:ids|indices)(?: |: |=)\[(?P<ids>[^\]]{3,400})\]")

# mp.spawn's parent reports a worker by its process index, the first argument of the worker
# function (the rank in most scripts): `-- Process 1 terminated with the following error:` before
# the worker's traceback, `process 1 terminated with exit code 1` or `... with signal SIGKILL`.
SPAWN_ERROR = lazy(r"-- Process (?P<i>\d+) terminated with the following error")
SPAWN_EXIT = lazy(r"process (?P<i>\d+) terminated with (?:exit code (?P<code>-?\d+)|signal (?P<sig>SIG\w+))")
SIGNAL_CODES = {"SIGKILL": -9, "SIGSEGV": -11, "SIGABRT": -6, "SIGBUS": -7, "SIGTERM": -15, "SIGINT": -2}

# What a rank says its epoch holds: `[rank1] epoch 0: 28 batches`, `rank 1: 448 samples`.
EPOCH_SIZE = lazy(r"\b(?P<n>\d+) batches\b")
