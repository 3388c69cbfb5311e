"""What to collect next, from what the logs themselves say is missing: the keys a store wait gave
up on, the ranks a count shows absent, the own output of ranks known only from the launcher."""
from __future__ import annotations

from typing import Any

from ..i18n import t as tr
from ..lazyre import lazy
from .records import Hit
from .timeline import RankLine
from .view import View

# the store server's own wait for its clients (TCPStore.cpp waitForWorkers): how many joined
JOINED = lazy(r"(?P<n>\d{1,7})/(?P<m>\d{1,7}) clients joined")


# the store-based barrier's count (distributed_c10d.py _store_based_barrier), in its signatures' lines
BARRIER_SIGS = ("store-barrier-count", "store-barrier-waiting")
_BARRIER = lazy(r"world_size=(?P<m>\d{1,7}), (?:worker_count|num_workers_joined)=(?P<n>\d{1,7})")


def barrier_count(view: View) -> tuple[Hit, int, int] | None:
    """The first store-based barrier count in the logs: its line, how many processes had joined,
    and the world size the barrier waited for."""
    return next(((h, int(m.group("n")), int(m.group("m"))) for sid in BARRIER_SIGS
                 for h in view.col.hits.get(sid, ()) for m in [_BARRIER.search(h.text)] if m), None)


def store_collect(view: View, who: dict[str, Any] | None) -> list[str]:
    """What to collect when store waits gave up and no rank could be named: the keys waited for
    and every rank's log (the rank that never wrote its key is late or never started); for the
    store-based barrier's count ("world_size=8, worker_count=7") and the store server's wait for
    its clients ("1/4 clients joined"), every rank's log too (which ranks arrived the count does
    not say)."""
    if who is not None:
        return []
    out = []
    keys = list(dict.fromkeys(k for w in view.col.store_waits for k in w.keys))
    if keys:
        out.append(tr("the logs of every rank: a rank waited in the store for {keys}; the rank that never "
                      "wrote its key is the late one (or was never started)",
                      keys=", ".join(keys[:4]) + (tr(" and {n} more", n=len(keys) - 4) if len(keys) > 4 else "")))
    barrier = barrier_count(view)
    if barrier and barrier[1] < barrier[2]:
        out.append(tr("the logs of every rank, or a stack of each (distdoctor stacks, py-spy dump): only {n} of "
                      "{m} ranks reached the store-based barrier; the rank missing from it is late or gone, and "
                      "its own lines say which and why", n=str(barrier[1]), m=str(barrier[2])))
    joined = next((m for h in view.hits_with("store-server") for m in [JOINED.search(h.text)] if m), None)
    if joined:
        out.append(tr("the logs of every rank: only {n} of {m} processes reached the store; the others never "
                      "started, started with another MASTER_ADDR/MASTER_PORT, or could not reach it",
                      n=joined.group("n"), m=joined.group("m")))
    return out


def output_missing(lines: dict[str, RankLine]) -> list[str]:
    """What to collect when ranks are known only from the launcher's record of their exit (torchrun's
    summary, mp.spawn's exit line) and no line of their own: their own output, which the launcher
    kept elsewhere (torchrun --log-dir/--redirects writes it per rank) or the paste left out. An exit
    code says that a rank ended, not why: a waiter that timed out exits 1 too."""
    bare = [r for r, rl in lines.items() if rl.exitcode is not None and rl.end.kind in ("exited", "stopped", "killed")
            and rl.end.hit is not None and rl.end.hit.sig == "x-exit" and rl.step is None and rl.phase is None
            and rl.last_collective is None and rl.last_ts is None]
    if not bare:
        return []
    return [tr("the own output of rank {ranks}: these logs hold only the launcher's record of how it exited (torchrun "
               "--log-dir with --redirects or --tee keeps each rank's stdout and stderr under <log-dir>/<run id>/"
               "attempt_<n>/<rank>/); an exit code says that a rank ended, not why", ranks=", ".join(bare[:8]))]
