"""The per-rank table, the facts summary and the first failure of a log analysis."""
from __future__ import annotations

from typing import Any

from ..ranks import rank_key, span
from .records import Hit
from .report import Evidence
from .score import not_waiting
from .setup_rules import fact_values
from .view import View, resolve

MAX_RANKS = 4096  # expected-but-missing ranks are listed up to this world size


def first_failure(view: View) -> Evidence | None:
    """The earliest root failure: a crash before anything else, by timestamp when all have one."""
    fails = [h for h in view.hits_with("failure") if "consequence" not in view.sigs[h.sig].tags
             and "wait" not in view.sigs[h.sig].tags]
    waits = [h for h in view.hits_with("wait") if "consequence" not in view.sigs[h.sig].tags]
    rest = view.hits_with("consequence")
    for pool in (view.crashes, fails, waits, rest):
        if pool:
            h = _earliest(pool)
            return Evidence(h.file, h.line, h.text, view.rank(h), h.sig)
    return None


def _earliest(hits: list[Hit]) -> Hit:
    stamped = [h for h in hits if h.ts is not None]
    kinds = {h.ts[0] for h in stamped if h.ts}
    if len(stamped) == len(hits) and len(kinds) == 1:
        return min(hits, key=lambda h: (h.ts[1] if h.ts else 0.0, h.order))
    return min(hits, key=lambda h: h.order)


def ranks_table(view: View) -> dict[str, dict[str, Any]]:
    """rank -> files, status, last collective (SeqNum, OpType) and first error line."""
    col = view.col
    crashed = {view.rank(h) for h in view.crashes} - {None}
    table: dict[str, dict[str, Any]] = {}

    def row(r: str) -> dict[str, Any]:
        return table.setdefault(r, {"files": sorted(col.seen.get(r, ())), "status": "seen",
                                    "last_collective": None, "first_error": None})

    for key in col.seen:
        r = key
        if ":" in key and key in col.proc_rank:
            r = col.proc_rank[key][1]
        entry = row(r)
        entry["files"] = sorted(set(entry["files"]) | col.seen[key])
    seqs: dict[str, int] = {}
    for pg, per in view.timeouts.items():
        for r, t in per.items():
            entry = row(r)
            entry["status"] = "timeout"
            entry["last_collective"] = {"seq": t.seq, "op": t.op, "pg": pg}
            if t.seq is not None and pg == "0":
                seqs[r] = t.seq
    if len(set(seqs.values())) > 1:
        lo = min(seqs.values())
        for r, q in seqs.items():
            table[r]["position"] = "behind" if q == lo else "ahead"
    for r, (_enq, done) in col.work_status.items():
        row((resolve(col, None, r) if ":" in r else r) or r)["last_completed"] = done
    for r, (code, _hit) in col.elastic_exits.items():
        entry = row(r)
        entry["exitcode"] = code
        if entry["status"] == "seen":
            entry["status"] = f"exited {code}"
    for r in crashed:
        row(r)["status"] = "crashed"
    if view.timeouts:
        for r in not_waiting(view):
            entry = row(r)
            if entry["status"] == "seen":
                entry["status"] = "not waiting" if r in col.seen else "missing"
    errors = sorted(view.crashes + [h for h in view.hits_with("failure")], key=lambda h: h.order)
    for h in errors:
        r = view.rank(h)
        if r is not None and r in table and table[r]["first_error"] is None:
            table[r]["first_error"] = {"file": h.file, "line": h.line, "text": h.text}
    return {r: table[r] for r in sorted(table, key=rank_key)}


def facts(view: View) -> dict[str, Any]:
    """Facts per rank, the values seen for each, which disagree, and the collective summary."""
    col = view.col
    by_rank: dict[str, dict[str, Any]] = {}
    for r, f in view.facts.items():
        by_rank[r] = dict(f)
    for r, kinds in view.channels.items():
        by_rank.setdefault(r, {})["channels"] = kinds
    values = fact_values(view)
    disagree = sorted(k for k, v in values.items() if len(v) > 1 and not k.startswith("env:")
                      and k not in ("bootstrap_if", "net_if"))
    for k in ("bootstrap_if", "net_if"):
        names = {val.split(":")[0] for val in values.get(k, {})}
        if len(names) > 1:
            disagree.append(k)
    waiting = view.waiting
    summary: dict[str, Any] = {"timeouts": len(waiting) + len(view.unranked)}
    if waiting or view.unranked:
        seqs: dict[str, list[str]] = {}
        for per in view.timeouts.values():
            for r, t in per.items():
                seqs.setdefault(f"{t.seq}:{t.op}", []).append(r)
        summary["at"] = {k: span(sorted(v, key=rank_key)) for k, v in seqs.items()}
        summary["not_waiting"] = span(not_waiting(view))
        summary["crashed"] = span(sorted({r for h in view.crashes if (r := view.rank(h))}, key=rank_key))
    return {
        "job": job(view),
        "by_rank": {r: by_rank[r] for r in sorted(by_rank, key=rank_key)},
        "values": {k: {val: span(rs) for val, rs in v.items()} for k, v in sorted(values.items())},
        "disagree": disagree,
        "world_size": col.world or None,
        "hosts": len(col.hosts),
        "nodes": col.nodes or None,
        "collectives": summary,
    }


def job(view: View) -> dict[str, str | None]:
    """The launcher and backend the logs reveal, so advice fits the job (GLOO_SOCKET_IFNAME for a
    Gloo job, torchrun's own options for a torchrun job), not distdoctor's own environment."""
    col = view.col
    texts = [h.text for hs in col.hits.values() for h in hs] + [e.hit.text for e in col.exceptions]
    joined = "\n".join(texts)
    launcher = None
    if view.hits_with("launcher") or col.elastic_exits and any("exitcode" in t for t in texts) \
            or "torch/distributed/run.py" in joined or "torchelastic" in joined:
        launcher = "torchrun"
    elif "srun:" in joined or "slurmstepd" in joined:
        launcher = "slurm"
    elif view.hits_with("spawn") or "torch.multiprocessing.spawn" in joined:
        launcher = "mp.spawn"
    backend = None
    if "gloo" in joined.lower() or "ProcessGroupGloo" in joined:
        backend = "gloo"
    if any("nccl_version" in f for f in view.facts.values()) or "ProcessGroupNCCL" in joined or "NCCL WARN" in joined:
        backend = "nccl" if backend is None else "gloo+nccl"
    return {"launcher": launcher, "backend": backend}
