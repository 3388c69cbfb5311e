"""Every rank's stack during a hang: find the job's ranks, dump them with py-spy, and say where
each rank is and which ones are odd (`distdoctor stacks`, `distdoctor fleet stacks`)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..base import ProbeContext
from .analyse import analyse, as_evidence, rank_key, rank_list
from .classify import Place, classify
from .discover import Job, RankProc, find_jobs, hostname, ranks_for_pids
from .dump import DUMP_TIMEOUT_S, NoPySpy, dump_all, dump_one, ensure_running, find_pyspy, proc_state
from .frames import DumpUnreadable, main_thread, parse_json_dump, parse_text_dump

__all__ = ["DUMP_TIMEOUT_S", "DumpUnreadable", "Job", "NoPySpy", "Place", "RankProc", "analyse",
           "as_evidence", "classify", "dump_all", "dump_one", "ensure_running", "find_jobs",
           "find_pyspy", "hostname", "main_thread", "merge_hosts", "parse_json_dump",
           "parse_text_dump", "proc_state", "rank_key", "rank_list", "ranks_for_pids", "take"]


def take(ranks: Sequence[RankProc], *, expected: Sequence[str] = (), native: bool = False,
         timeout: float = DUMP_TIMEOUT_S, host: str | None = None, ctx: ProbeContext | None = None,
         rerun: str = "distdoctor stacks") -> dict[str, Any]:
    """Dump `ranks` and analyse them: the `stacks --json` document."""
    host = host or hostname()
    dumped = dump_all(ranks, host, native=native, timeout=timeout, ctx=ctx, rerun=rerun)
    return analyse(dumped, expected)


def merge_hosts(docs: Sequence[dict[str, Any]], expected: Sequence[str] = ()) -> dict[str, Any]:
    """Several nodes' `stacks --json` documents read as one job: their ranks analysed together,
    so the odd rank is found across nodes. A rank's "where" starting `not dumped:` keeps its error."""
    ranks = []
    for doc in docs:
        for r in doc.get("ranks") or []:
            entry = {"rank": str(r.get("rank")), "pid": r.get("pid"), "host": r.get("host", ""),
                     "frames": r.get("frames") or []}
            where = str(r.get("where") or "")
            if where.startswith("not dumped: "):
                entry["error"] = where[len("not dumped: "):]
            ranks.append(entry)
    return analyse(ranks, expected)
