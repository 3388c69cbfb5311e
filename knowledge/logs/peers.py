"""What the lines show of a rank while the others waited: alive or busy (its own lines, its
waiters' transport), late to a collective, interrupted inside one. Read by the culprit rules
(culprit.py), which name the rank."""
from __future__ import annotations

from ..lazyre import lazy
from .timeline import RankLine
from .tocollect import JOINED
from .view import View

# what only rank 0 does, by the phase of its own last lines (eval tables, saving, loading, data)
RANK0_WORK = ("eval", "save", "load", "dataloader")


# how long a waiter waited: Gloo's "Timed out waiting 10000ms", NCCL's watchdog "Timeout(ms)=600000"
_WAITED = lazy(r"waiting (?P<ms>\d+) ?ms|Timeout\(ms\)=(?P<ms2>\d+)")


# Gloo's own wait on a pair's socket: the peer's process kept its connection open all along (a
# process that exits closes it, and the waiter reads "Connection closed by peer" instead)
_SOCKET_WAIT = lazy(r"Timed out waiting \d+ ?ms for (?:recv|send) operation")


def finished_first(view: View, waiters: list[RankLine]) -> bool:
    """A finish line that no waiter wrote (no rank, or another rank) sits before a waiter's lost
    peer in the same file (Lightning's "`Trainer.fit` stopped" prints on rank 0 alone)."""
    ends = [h for h in view.hits_with("end") if view.rank(h) not in {rl.rank for rl in waiters}]
    return any(h.file == rl.end.hit.file and h.line < rl.end.hit.line
               for rl in waiters if rl.end.hit is not None for h in ends)


def own_lines_show_it(rl: RankLine, waiters: list[RankLine]) -> bool:
    """Whether a silent rank's own lines show it at work while the others waited: its last lines in
    work the others do not wait in (eval, saving, loading, data), or its last timestamped line
    after a waiter's failure."""
    if rl.phase in RANK0_WORK:
        return True
    return any(rl.last_ts is not None and at is not None and rl.last_ts[0] == at[0] and rl.last_ts[1] > at[1]
               for w in waiters for at in [w.end.hit.ts if w.end.hit is not None and w.end.hit.ts else w.last_ts])


def seen_alive(rl: RankLine, waiters: list[RankLine]) -> bool:
    """Whether lines present show a silent rank alive while the others waited, not dead: the
    launcher stopped it after their failure (SIGTERM, SIGINT), its own last lines show it in work
    the others do not wait in (eval, saving, loading, data), its own last timestamped line comes
    after a waiter's failure, or a waiter's Gloo socket wait timed out rather than losing its peer.
    The absence of a failure line alone shows none of this."""
    if rl.end.kind == "stopped" or own_lines_show_it(rl, waiters):
        return True  # stopped by the launcher after the others failed; or its own lines show it at work
    return any(w.end.kind == "timeout" and socket_wait(w) for w in waiters)


def socket_wait(w: RankLine) -> bool:
    """Whether a waiter's own failure is Gloo's socket wait that timed out."""
    return bool(_SOCKET_WAIT.search(w.end.detail) or w.end.hit is not None and _SOCKET_WAIT.search(w.end.hit.text))


def in_collective(view: View, rl: RankLine) -> bool:
    """Whether the traceback that ended a rank passes through a collective (a frame of c10d's
    collectives or a call of one, at most 60 lines before its last line, in the same file)."""
    h = rl.end.hit
    return h is not None and any(view.rank(o) == rl.rank and o.file == h.file and 0 <= h.line - o.line <= 60
                                 for ops in view.col.ops.values() for o in ops)


def late(waiters: list[RankLine]) -> tuple[list[RankLine], bool]:
    """Ranks that lost their peer after another rank timed out: the waiter gave up and exited, so
    the connection of the rank it waited for closed. Order by clock when both lines have one of
    the same kind, else by reading order within one file, else by the late rank's last timestamp
    past the waiter's timeout; else, when no clock saw it after them and every waiter's own failure
    is Gloo's socket wait that timed out (its peers' processes kept their connections open all
    along, so none of them had died), the closed connection the other rank lost came from a
    waiter that gave up. The flag says whether that last reading named any rank."""
    timed = [rl for rl in waiters if rl.end.kind == "timeout" and rl.end.hit is not None]
    lost = [rl for rl in waiters if rl.end.kind == "lost-peer" and rl.end.hit is not None]
    sockets = bool(timed) and all(socket_wait(t) for t in timed)
    out, by_socket = [], False
    for rl in lost:
        h = rl.end.hit
        for t in timed:
            th = t.end.hit
            if h.ts and th.ts and h.ts[0] == th.ts[0]:  # type: ignore[union-attr]
                after = h.ts[1] > th.ts[1]  # type: ignore[union-attr]
            elif h.file == th.file:
                # two ranks' streams in one console need not keep their order: the transport decides too
                after = h.line > th.line  # type: ignore[union-attr]
                if not after and sockets:
                    after = by_socket = True
            else:
                after = arrived_after_timeout(rl, t)
                if not after and sockets and not seen_after(rl, t):  # a clock that saw it later decides
                    after = by_socket = True
            if after:
                out.append(rl)
                break
    return out, by_socket


def seen_after(a: RankLine, b: RankLine) -> bool:
    """Whether rank a's last timestamped line comes after rank b's (the same kind of clock): then
    the clock, not the transport, says whether a arrived within b's timeout."""
    return a.last_ts is not None and b.last_ts is not None and a.last_ts[0] == b.last_ts[0] \
        and a.last_ts[1] > b.last_ts[1]


def arrived_after_timeout(late: RankLine, waiter: RankLine) -> bool:
    """With no clock on the failure lines themselves: the late rank's last timestamped line comes
    after the waiter's last one plus the waiter's own timeout (its message says how long it
    waited), so the late rank reached the collective only after the waiter had given up."""
    m = _WAITED.search(waiter.end.detail) or _WAITED.search(waiter.end.hit.text if waiter.end.hit else "")
    a, b = late.last_ts, waiter.last_ts
    if not m or a is None or b is None or a[0] != b[0]:
        return False
    return a[1] > b[1] + int(m.group("ms") or m.group("ms2")) / 1000


def store_client_missing(view: View, lines: dict[str, RankLine]) -> bool:
    """In a world of two started without a launcher, the rendezvous store's server waited for its one
    client while a process of these logs failed to connect to a store: env:// rendezvous hosts the
    store in rank 0 (TCPStore is_master = rank 0), so the client that never arrived is rank 1, which
    could not reach rank 0's store (its MASTER_ADDR or MASTER_PORT, or the route). False in a larger
    world (the count does not say which client), under torchrun (its agent hosts the store and counts
    nodes), or when rank 1's own lines show it got through."""
    joined = next((m for h in view.hits_with("store-server") for m in [JOINED.search(h.text)] if m), None)
    if joined is None or (joined.group("n"), joined.group("m")) != ("1", "2") or view.hits_with("launcher"):
        return False
    return bool(view.col.hits.get("client-socket-store")) and (lines.get("1") is None or lines["1"].step is None)
