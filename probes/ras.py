"""NCCL RAS: ask a running NCCL job (2.24+) through `ncclras` which ranks are dead, missing or
unresponsive and which disagree on how many collectives they launched.

`ncclras` talks to the RAS thread every NCCL process runs (localhost:28028 unless NCCL_RAS_ADDR
moved it). Its text output is parsed line by line after the formats in NCCL's
src/ras/client_support.cc; NCCL 2.28.7 added `-f json`, preferred when the client has it. Ranks
here are communicator ranks, which are the global ranks for the world communicator.
"""
from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from types import MappingProxyType
from typing import Any

from distdoctor.knowledge import nccl_grammar as grammar
from distdoctor.knowledge.i18n import t

from .base import FAIL, OK, ProbeContext, ProbeResult, unavailable

NAME = "ras"
UNAVAILABLE = ("ncclras not on PATH (NCCL 2.24+ runs a RAS thread in every process; its client "
               "ncclras ships with NCCL builds from source and NGC containers)")
JSON_SINCE = (2, 28, 7)
# the client waits up to -t seconds per leg plus as much again; leave room for the connection
LEG_TIMEOUT_S = 5

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_PROCESS = re.compile(r"^\s+Process (\d+) on node (\S+) managing GPUs? (.+)$")
_RANK_LINE = re.compile(r"^\s+Rank (\d+)(?: (has launched up to operation (\d+)|has not launched any "
                        r"operations|reported (.+?)|has status (\S+)))?(?: -- (?:GPU (\S+)(?: \(NVML \S+\))? "
                        r"managed by process (\d+) on node (\S+)|\[process information not found\]))?$")
_COMM = re.compile(r"^#(\d+)-(\d+) \(([0-9a-fA-F]+)\) (INCOMPLETE|ERROR|MISMATCH)$")
_GROUP = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)$")


def _vtuple(text: str | None) -> tuple[int, ...] | None:
    match = _VERSION.search(text or "")
    return tuple(int(x) for x in match.groups()) if match else None


def _empty(fmt: str) -> dict[str, Any]:
    return {"format": fmt, "nccl_version": None, "communicators": [], "dead": [], "missing": [],
            "unresponsive": [], "errors": [], "mismatches": [], "timeouts": 0}


def parse_text(text: str) -> dict[str, Any]:
    """Facts from `ncclras` text output (NCCL 2.24+)."""
    facts = _empty("text")
    section = ""
    comm: dict[str, Any] | None = None
    block = ""
    mismatch: dict[str, Any] | None = None
    groups: list[dict[str, Any]] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        banner = grammar.VERSION_RX.match(line)
        if banner:  # "NCCL version 2.26.2+cuda12.8 compiled with CUDA 12.8"
            facts["nccl_version"] = banner.group("full").split("+")[0]
            continue
        if line in ("Errors", "Warnings", "Job summary") or line.startswith("Communicators..."):
            section, block, comm = line.split("...")[0], "", None
            continue
        if not line or set(line) == {"="}:
            continue
        row = _GROUP.match(line)
        if section == "Communicators" and row:
            facts["communicators"].append({"group": int(row.group(1)), "comms": int(row.group(2)),
                                           "ranks": int(row.group(5)), "status": row.group(7),
                                           "errors": row.group(8).split(",")})
            continue
        head = _COMM.match(line)
        if head:
            block, comm = head.group(4), {"comm": head.group(3)}
            continue
        if line in ("DEAD", "INCOMPLETE", "TIMEOUT"):
            block, comm = line, None
            continue
        if block == "TIMEOUT":
            found = re.search(r"Encountered (\d+) communication timeout", line)
            facts["timeouts"] = int(found.group(1)) if found else facts["timeouts"]
        elif block == "DEAD":
            proc = _PROCESS.match(line)
            if proc:
                facts["dead"].append({"rank": None, "pid": int(proc.group(1)), "host": proc.group(2),
                                      "gpu": proc.group(3), "comm": None})
        elif block == "INCOMPLETE" and comm is not None:
            got = _RANK_LINE.match(line)
            if got:  # a rank of this communicator that sent no answer
                facts["unresponsive"].append(_who(got, comm["comm"]))
        elif block == "INCOMPLETE":
            proc = _PROCESS.match(line)
            if proc:  # job-wide: a process that sent no communicator data at all
                facts["missing"].append({"rank": None, "pid": int(proc.group(1)), "host": proc.group(2),
                                         "gpu": proc.group(3), "comm": None})
        elif block == "ERROR" and comm is not None:
            got = _RANK_LINE.match(line)
            if got:
                facts["errors"].append({**_who(got, comm["comm"]), "error": got.group(4) or "error"})
        elif block == "MISMATCH" and comm is not None:
            kind = re.match(r"^\s+Communicator ranks have different (\S+) operation counts$", line)
            if kind or line.strip() == "Communicator ranks have different status":
                mismatch = {"comm": comm["comm"], "op": kind.group(1) if kind else "status", "counts": {}}
                facts["mismatches"].append(mismatch)
                groups = []
                continue
            if mismatch is None:
                continue
            many = re.match(r"^\s+(\d+) ranks have (?:launched up to operation (\d+)|not launched any "
                            r"operations|status (\S+))$", line)
            if many:
                groups.append({"value": many.group(2) or many.group(3) or "0", "n": int(many.group(1)),
                               "ranks": []})
                mismatch["groups"] = groups
                continue
            got = _RANK_LINE.match(line)
            if got:
                value = got.group(3) or got.group(5) or ("0" if "not launched" in line else None)
                if value is None and groups:
                    groups[-1]["ranks"].append(got.group(1))
                else:
                    groups.append({"value": value, "n": 1, "ranks": [got.group(1)]})
                mismatch["groups"] = groups
    # a dead process is a rank when a communicator's INCOMPLETE block names it by pid; it is then
    # listed as dead only, as the JSON output does
    by_pid = {(m["pid"], m["host"]): m for m in facts["unresponsive"] if m.get("pid")}
    for dead in facts["dead"]:
        named = by_pid.get((dead["pid"], dead["host"]))
        if named is not None:
            dead.update(rank=named["rank"], comm=named["comm"])
    gone = {(d["pid"], d["host"]) for d in facts["dead"]}
    facts["unresponsive"] = [u for u in facts["unresponsive"] if (u["pid"], u["host"]) not in gone]
    facts["missing"] = [m for m in facts["missing"] if (m["pid"], m["host"]) not in gone]
    for m in facts["mismatches"]:
        _judge_groups(m)
    return facts


def _who(got: re.Match[str], comm: str) -> dict[str, Any]:
    return {"rank": got.group(1), "pid": int(got.group(7)) if got.group(7) else None,
            "host": got.group(8), "gpu": got.group(6), "comm": comm}


def _judge_groups(m: dict[str, Any]) -> None:
    """From the printed groups ("7 ranks at 1042", "rank 3 at 1041"), the odd ranks and whether
    they are behind or ahead of the majority."""
    groups = m.pop("groups", [])
    if not groups:
        m.update(odd=[], majority=None, behind=None)
        return
    main = max(groups, key=lambda g: g["n"])
    odd = sorted({r for g in groups if g is not main for r in g["ranks"]}, key=int)
    m["counts"] = {r: g["value"] for g in groups for r in g["ranks"]}
    m.update(odd=odd, majority=main["value"])
    if m["op"] != "status" and odd:
        m["behind"] = all(int(g["value"]) < int(main["value"]) for g in groups if g is not main)
    else:
        m["behind"] = None


# NCCL 2.28.9 prints a missing rank's `"nvml_dev": N` with no comma before its `"status"`: a value
# at the end of a line followed by a key on the next can only be a missing comma
_NO_COMMA = re.compile(r'(\d|"|true|false|null|[}\]])(\s*\n\s*"[^"\n]*"\s*:)')


def loads_json(text: str) -> Any:
    """`ncclras -f json` output as data, the comma NCCL 2.28.9 leaves out put back."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as first:
        try:
            return json.loads(_NO_COMMA.sub(r"\1,\2", text))
        except json.JSONDecodeError:
            raise first from None


def parse_json(text: str) -> dict[str, Any]:
    """Facts from `ncclras -f json` (NCCL 2.28.7+). Raises ValueError when it is not that JSON."""
    try:
        doc = loads_json(text)
    except json.JSONDecodeError as exc:
        raise ValueError(t("not JSON ({why})", why=exc)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("communicators"), list):
        raise ValueError(t("not ncclras JSON (no 'communicators' list)"))
    facts = _empty("json")
    facts["nccl_version"] = doc.get("nccl_version")
    facts["timeouts"] = int((doc.get("ras") or {}).get("timeouts_count") or 0)
    for comm in doc["communicators"]:
        if not isinstance(comm, dict):
            continue
        name = str(comm.get("hash", "?"))
        ranks = [r for r in comm.get("ranks") or [] if isinstance(r, dict)]
        facts["communicators"].append({"comm": name, "ranks": comm.get("size"),
                                       "missing": comm.get("missing_ranks_count", 0)})
        for miss in comm.get("missing_ranks") or []:
            if not isinstance(miss, dict):
                continue
            status = miss.get("status") or {}
            who = {"rank": str(miss.get("rank")), "pid": miss.get("pid"), "host": miss.get("host"),
                   "gpu": str(miss.get("cuda_dev")), "comm": name}
            if status.get("considered_dead"):
                facts["dead"].append(who)
            elif status.get("unresponsive"):
                facts["unresponsive"].append(who)
            else:
                facts["missing"].append(who)
        for r in ranks:
            status = r.get("status") or {}
            err = status.get("async_error") or status.get("init_state")
            if err not in (0, None, 7):  # 7 is ncclInProgress, not an error
                facts["errors"].append({"rank": str(r.get("rank")), "pid": r.get("pid"), "host": r.get("host"),
                                        "gpu": str(r.get("cuda_dev")), "comm": name, "error": f"ncclResult {err}"})
        ops = sorted({op for r in ranks for op in (r.get("collective_counts") or {})})
        for op in ops:
            counts = {str(r.get("rank")): (r.get("collective_counts") or {}).get(op) for r in ranks}
            if len(set(counts.values())) > 1:
                tally = Counter(counts.values())
                main = max(tally.items(), key=lambda kv: (kv[1], -1 * (kv[0] or 0)))[0]
                odd = sorted((r for r, c in counts.items() if c != main), key=int)
                facts["mismatches"].append({
                    "comm": name, "op": op, "counts": {r: str(c) for r, c in counts.items()},
                    "odd": odd, "majority": str(main),
                    "behind": all((counts[r] or 0) < (main or 0) for r in odd)})
    return facts


def parse(text: str) -> dict[str, Any]:
    """Either format, told apart by the first character."""
    return parse_json(text) if text.lstrip().startswith("{") else parse_text(text)


def problems(facts: dict[str, Any]) -> bool:
    return bool(facts["dead"] or facts["missing"] or facts["unresponsive"] or facts["errors"]
                or facts["mismatches"])


def as_evidence(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """Evidence items for the verdict engine (source "ras")."""
    items = []

    def ranks(who: list[dict[str, Any]]) -> list[str]:
        return sorted({w["rank"] for w in who if w.get("rank") is not None}, key=int)

    def procs(who: list[dict[str, Any]]) -> str:
        return t(", ").join((t("rank {rank} ", rank=w["rank"]) if w.get("rank") else "")
                            + t("(pid {pid} on {host})", pid=w.get("pid"), host=w.get("host")) for w in who)

    if facts["dead"]:
        items.append({"source": "ras", "ranks": ranks(facts["dead"]), "role": "crashed",
                      "why": t("NCCL RAS considers {who} dead: unreachable over its network",
                               who=procs(facts["dead"])),
                      "cause": "rank-crash-deadlock"})
    gone = facts["missing"] + facts["unresponsive"]
    dead_ranks = set(ranks(facts["dead"]))
    gone = [w for w in gone if w.get("rank") not in dead_ranks]
    if gone:
        items.append({"source": "ras", "ranks": ranks(gone), "role": "stuck",
                      "why": t("NCCL RAS got no answer from {who} (unresponsive or missing)", who=procs(gone)),
                      "cause": "collective-timeout"})
    for m in facts["mismatches"]:
        if not m.get("odd"):
            continue
        if m["op"] == "status":
            why = t("communicator {comm}: ranks {ranks} have a different status", comm=m["comm"],
                    ranks=", ".join(m["odd"]))
            items.append({"source": "ras", "ranks": m["odd"], "role": "stuck", "why": why, "cause": None})
            continue
        counts = t(", ").join(t("rank {rank} at {count}", rank=r, count=m["counts"].get(r)) for r in m["odd"])
        if m.get("behind"):
            items.append({"source": "ras", "ranks": m["odd"], "role": "stuck",
                          "why": t("{op} counts differ: most ranks launched up to {majority}, {counts}: behind, "
                                   "never reached the collective the others wait in", op=m["op"],
                                   majority=m["majority"], counts=counts),
                          "cause": "collective-timeout"})
        else:
            items.append({"source": "ras", "ranks": m["odd"], "role": "misconfigured",
                          "why": t("{op} counts differ: most ranks launched up to {majority}, {counts}: ahead, "
                                   "a collective only some ranks call", op=m["op"], majority=m["majority"],
                                   counts=counts),
                          "cause": "asymmetric-collective"})
    for e in facts["errors"]:
        items.append({"source": "ras", "ranks": [e["rank"]] if e.get("rank") else [], "role": None,
                      "why": t("NCCL RAS: rank {rank} reported {error}", rank=e.get("rank"), error=e.get("error")),
                      "cause": None})
    return items


def client_version(ctx: ProbeContext, exe: str) -> tuple[int, ...] | None:
    """`ncclras --version` prints "NCCL RAS client version 2.28.7..." on stderr."""
    result = ctx.runner([exe, "--version"], timeout=ctx.timeout)
    return _vtuple(result.stderr + result.stdout) if not result.error else None


def probe_ras(ctx: ProbeContext, *, host: str | None = None, port: int | None = None,
              timeout_s: int = LEG_TIMEOUT_S, limit_s: float | None = None) -> ProbeResult:
    """Query the job's RAS thread; unavailable with a reason when it cannot be asked."""
    exe = shutil.which("ncclras", path=ctx.env.get("PATH"))
    if not exe:
        return unavailable(NAME, t(UNAVAILABLE))
    version = client_version(ctx, exe)
    argv = [exe, "-t", str(timeout_s)]
    if host:
        argv += ["-h", host]
    if port:
        argv += ["-p", str(port)]
    use_json = version is not None and version >= JSON_SINCE
    # the client itself waits -t per leg and as much again; past that it is stuck
    limit = limit_s or 2 * timeout_s + 2 * LEG_TIMEOUT_S + 5
    result = ctx.runner(argv + (["-f", "json"] if use_json else []), timeout=limit)
    if result.error:
        return unavailable(NAME, t("ncclras did not answer: {error}", error=result.error))
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return unavailable(NAME, t("ncclras exited {code}: {tail} (is an NCCL job running on this node, with "
                                   "NCCL_RAS_ENABLE unset or 1?)", code=result.returncode, tail=tail[:200]))
    try:
        facts = parse(result.stdout)
    except ValueError as exc:
        return unavailable(NAME, t("ncclras output unreadable: {why}", why=exc))
    facts["client_version"] = ".".join(map(str, version)) if version else None
    return ProbeResult(NAME, FAIL if problems(facts) else OK, MappingProxyType(facts),
                       raw=result.stdout[-20000:], duration_s=result.duration_s)
