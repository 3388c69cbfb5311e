"""Who failed first, who was stuck, who waited: the culprit and the story of a log set.

Mechanisms (GUIDE.md section 1, 4):
- crashed: a rank whose own lines end in a failure of its own (a traceback whose message is not a
  lost peer or a timeout, an OOM, a segfault, a kill signal). When several did, the earliest one.
- stuck: no rank crashed, other ranks timed out or lost their peer, and this rank's own lines are
  present but end in neither a failure nor a finish: it never reached the collective. Also the rank
  that lost its peer only after the others had timed out (by the failure lines' clock, else by its
  last timestamped line coming after the waiters' own timeout), and the rank with more batches per
  epoch when the only "crash" is an abort with no error of the rank's own (a teardown).
- slow: every rank timed out, but at different SeqNums: the ones behind are the first suspects.
- misconfigured: ranks whose NCCL version or interface differs from the others'.
A rank absent from the input is named only by inference (`inferred`: likely at most), from what the
others' lines say of it (DL912, DL915, DL916, DL917): the input may be an excerpt.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from ..i18n import t as tr
from . import extract as x, peers
from .peers import RANK0_WORK
from .setup_rules import odd_resume
from .story import WAITING, ended, names, summary
from .timeline import INTERRUPTED, RankLine, only_waits_raised, short
from .view import View

ABORT = -6  # SIGABRT as the launcher reports it


def culprit(view: View, lines: dict[str, RankLine]) -> dict[str, Any] | None:
    """The culprit as {"ranks", "role", "why", "rule"} (rule: the rules.toml id of the culprit
    rule that named it; the engine takes it out of the dict), or None."""
    crashed = [rl for rl in lines.values() if rl.end.kind in ("crashed", "killed")]
    # a rank interrupted while it waited in a collective was a waiter that someone stopped (people
    # press Ctrl-C on a hung job): it reached the collective, so it is neither the culprit nor silent
    stopped_waiting = [rl for rl in crashed if rl.end.detail == INTERRUPTED and peers.in_collective(view, rl)]
    crashed = [rl for rl in crashed if rl not in stopped_waiting]
    waiters = [rl for rl in lines.values() if rl.end.kind in WAITING] + stopped_waiting
    interrupted = [rl for rl in crashed if rl.end.detail == INTERRUPTED]
    if interrupted and len(interrupted) == len(crashed):
        if not waiters and len(interrupted) > 1:
            return None  # every rank got the SIGINT: the job was stopped from outside, by no rank
        if waiters and all(rl.end.kind == "timeout" for rl in waiters):
            return _interrupted_stuck(interrupted, waiters)
    uneven = _uneven(view, waiters)
    if uneven and all(rl.exitcode == ABORT and rl.end.exc is None for rl in crashed):
        # an abort with no error of the rank's own is how a process is torn down (the watchdog,
        # or a backend's exit): the uneven inputs explain why the others were left waiting
        return uneven
    if crashed:
        first = _earliest(crashed)
        why = tr("rank {rank} {ended}", rank=first.rank, ended=ended(first))
        if waiters:
            why += tr("; rank {ranks} was left waiting" if len(waiters) == 1 else "; rank {ranks} were left waiting",
                     ranks=names(waiters))
        found = {"ranks": [first.rank], "role": "crashed", "why": why, "rule": "DL901"}
        if first.end.exc is not None and first.end.exc.frame:
            found["location"] = first.end.exc.frame  # the culprit's own code
        return found
    if uneven:
        return uneven
    named = _store_beyond_world(view) or _named_late(view, lines) or _store_named(view, lines)
    if named:
        return named
    late, by_socket = peers.late(waiters)
    if late:
        timed = [rl for rl in waiters if rl.end.kind == "timeout"]
        # ordered only by what the transport says (no clock, no common file): the world may hold
        # another rank these logs lack, which the late one could have lost instead
        inferred = {"inferred": True} if by_socket else _rank0_unshown(late)
        return {"ranks": [rl.rank for rl in late], "role": "stuck", "rule": "DL904", **inferred,
                "why": tr("rank {late} lost its peer only after rank {timed} had timed out waiting: it was "
                         "the late one" if len(late) == 1 else "rank {late} lost its peer only after rank "
                         "{timed} had timed out waiting: they were the late one",
                         late=names(late), timed=names(timed))}
    if waiters:
        seqs = {rl.rank: rl.last_collective.get("seq") for rl in waiters
                if rl.last_collective and rl.last_collective.get("seq") is not None}
        others = [rl for rl in lines.values() if rl.end.kind in ("unknown", "exited", "stopped") and rl.rank not in seqs
                  and rl not in waiters]
        if others and all(rl.end.kind == "lost-peer" for rl in waiters) and peers.finished_first(view, waiters):
            # a closed connection says the peer's process is gone, and a process that finished
            # closes it too: with a finish line no rank owns before the loss, crash and early
            # finish (ranks that ran different numbers of steps) fit alike
            return None
        if others and all(rl.end.kind == "lost-peer" for rl in waiters):
            # a closed or reset connection means the peer's process is gone; a hung one keeps it open.
            # A rank the launcher stopped (SIGTERM, SIGINT) was stopped because another had already
            # failed: beside a rank that exited of its own accord it is a consequence, never the culprit
            others = [rl for rl in others if rl.end.kind != "stopped"] or others
            return {"ranks": [rl.rank for rl in others], "role": "crashed", "rule": "DL905",
                    "why": tr("rank {waiters} lost its connection to rank {others}, whose own lines show no "
                             "error: it exited without a traceback (os._exit, a kill, a native crash)",
                             waiters=names(waiters), others=names(others))}
        if others:
            # several silent ranks: the waiters cannot say which of them they waited for (a
            # launcher shows one failure and stops the rest), so the naming is an inference
            # of several silent ranks, the one whose own lines show it alive or busy in work of its
            # own is the lead (still an inference: the others' failures may just not be shown)
            alive = [rl for rl in others if peers.own_lines_show_it(rl, waiters)] if len(others) > 1 else []
            narrowed = len(alive) == 1
            others = alive if narrowed else others
            # the naming rests on a missing failure line; only lines that show the rank alive while
            # the others waited make it more than an inference (people paste excerpts)
            shown = len(others) == 1 and not narrowed and peers.seen_alive(others[0], waiters)
            return {"ranks": [rl.rank for rl in others], "role": "stuck", "rule": "DL906",
                    **({"inferred": True} if not shown else _rank0_unshown(others)),
                    "why": tr("rank {waiters} timed out or lost its peer while rank {others} never reported "
                             "a failure: it never reached the collective" if len(others) == 1 else
                             "rank {waiters} timed out or lost its peer while rank {others} never reported "
                             "a failure: they never reached the collective",
                             waiters=names(waiters), others=names(others))}
        done = [rl for rl in lines.values() if rl.end.kind == "finished"]
        if done:
            return {"ranks": [rl.rank for rl in waiters], "role": "stuck", "rule": "DL907",
                    "why": tr("rank {waiters} kept calling collectives after rank {done} had finished: the "
                             "ranks ran different numbers of steps", waiters=names(waiters), done=names(done))}
        if len(set(seqs.values())) > 1:
            lo = min(seqs.values())
            behind = [r for r, q in seqs.items() if q == lo]
            return {"ranks": behind, "role": "slow", "rule": "DL908",
                    "why": tr("rank {ranks} timed out at SeqNum {lo}, behind the others (up to {hi}): the "
                             "lowest SeqNum is the first suspect", ranks=", ".join(behind), lo=lo,
                             hi=max(seqs.values()))}
        absent = _absent_from_timeouts(view, lines, waiters) or _only_peer(view, lines, waiters)
        if absent:
            return absent
    odd = _broadcast_root(view, lines, waiters) or _odd_facts(view) or _odd_resume(view) or _store_client(view, lines)
    if odd:
        return odd
    exited = [rl for rl in lines.values() if rl.end.kind == "exited"]
    if exited and not waiters and not only_waits_raised(view):
        first = _earliest_exit(exited)
        return {"ranks": [first.rank], "role": "crashed", "rule": "DL910",
                "why": tr("rank {rank} exited with code {code}, the first failure the launcher saw",
                         rank=first.rank, code=first.exitcode)}
    return None














def _interrupted_stuck(interrupted: list[RankLine], waiters: list[RankLine]) -> dict[str, Any]:
    """A rank stopped by SIGINT (its own KeyboardInterrupt) while the others timed out waiting: a
    timeout, not a closed connection, means its process was still there while they waited, so it
    was stuck before the interrupt (people press Ctrl-C on a hung rank); the interrupt is how it
    ended, not why the others waited. Silent when a waiter lost its peer instead (the connection
    closed: the interrupt came first, DL901) or when another rank failed on its own."""
    return {"ranks": [rl.rank for rl in interrupted], "role": "stuck", "rule": "DL914",
            "why": tr("rank {waiters} timed out waiting while rank {ranks} was still running, until it was "
                      "interrupted (SIGINT): it never reached the collective", waiters=names(waiters),
                      ranks=names(interrupted))}


def _named_late(view: View, lines: dict[str, RankLine]) -> dict[str, Any] | None:
    """The waiters name the late rank: ranks a monitored barrier lists as not arriving, when no
    rank crashed on its own (a rank that did is the culprit instead). The rank that raised the
    barrier's error was waiting for them, never the culprit. Silent when a named rank's own lines
    end in a wait too (then both waited on someone else)."""
    named = {r: h for r, h in view.col.named_late.items()
             if lines.get(r) is None or lines[r].end.kind not in WAITING}
    if not named:
        return None
    ranks = sorted(named, key=int)
    hit = named[ranks[0]]
    waiter = view.rank(hit) or "0"  # torch runs the monitoring on rank 0
    return {"ranks": ranks, "role": "stuck", "rule": "DL903",
            "why": tr("rank {waiter}'s monitored barrier names rank {ranks} as never arriving ({where})",
                      waiter=waiter, ranks=", ".join(ranks), where=f"{short(hit.file)}:{hit.line}")}




def _rank0_unshown(late: list[RankLine]) -> dict[str, Any]:
    """Rank 0 named late by where the waiters' timeouts leave it, with no line of rank-0-only work:
    late past the timeout fits two causes alike (its extra work, or a plain late rank), so the
    naming is `inferred` (likely at most, never confirmed)."""
    if [rl.rank for rl in late] == ["0"] and late[0].phase not in RANK0_WORK:
        return {"inferred": True}
    return {}


def _absent_from_timeouts(view: View, lines: dict[str, RankLine], waiters: list[RankLine]) -> dict[str, Any] | None:
    """The rank absent from every other rank's timeout: two or more ranks timed out, the logs give
    the world size, every rank of it but one is seen timing out, and that one has no line in the
    input. It is the likely late rank, named by elimination (`inferred`: its own log would show it
    timing out too). Silent with one waiter, with an unknown world, or when two or more ranks are
    unaccounted for."""
    timed = {rl.rank for rl in waiters if rl.end.kind == "timeout" and rl.rank.isdigit()}
    world = view.col.world
    if len(timed) < 2 or not 3 <= world <= 4096 or len(timed) != world - 1:
        return None
    missing = [str(r) for r in range(world) if str(r) not in lines]
    if len(missing) != 1:
        return None
    return {"ranks": missing, "role": "stuck", "rule": "DL912", "inferred": True,
            "why": tr("rank {waiters} timed out and rank {rank}, the one rank of {world} not seen timing out, "
                      "has no line in these logs: it is the likely late rank (its own log would tell)",
                      waiters=", ".join(sorted(timed, key=int)), rank=missing[0], world=world)}


def _only_peer(view: View, lines: dict[str, RankLine], waiters: list[RankLine]) -> dict[str, Any] | None:
    """In a two-rank world (the logs say so), the one rank present waited on its only peer, the
    other rank, which has no line in the input. When its Gloo socket wait timed out, that peer's
    process kept the connection open (alive): the likely late rank, stuck. When it lost the
    connection (its own exception says so), that peer's process went away: it exited or died
    first, crashed. Both `inferred` (its own log would tell). Silent with a watchdog timeout (a
    dead peer times out too), or when the other rank has lines of its own."""
    if view.col.world != 2 or len(lines) != 1 or len(waiters) != 1:
        return None
    w = waiters[0]
    other = {"0": "1", "1": "0"}.get(w.rank)
    if other is None or other in view.col.last_ts:
        return None
    if w.end.kind == "lost-peer" and w.end.exc is not None:
        # a connection that closed: the one peer's process went away (it exited or died)
        return {"ranks": [other], "role": "crashed", "rule": "DL915", "inferred": True,
                "why": tr("rank {waiter} lost the connection to its one peer in a world of 2: rank {rank}, which has "
                          "no line in these logs, exited or died first (its own log would say why)",
                          waiter=w.rank, rank=other)}
    if w.end.kind != "timeout" or not peers.socket_wait(w):
        return None
    return {"ranks": [other], "role": "stuck", "rule": "DL915", "inferred": True,
            "why": tr("rank {waiter} timed out waiting on its one peer in a world of 2, whose connection stayed open: "
                      "rank {rank}, which has no line in these logs, is the likely late rank (its own log would tell)",
                      waiter=w.rank, rank=other)}


def _store_beyond_world(view: View) -> dict[str, Any] | None:
    """DL918: a rank waited in the store for the key of rank R while other ranks' own lines give
    the job fewer than R + 1 ranks (`rank 0/2`, `world_size=2`): that rank was started with a
    larger WORLD_SIZE than the others and waits for a rank that does not exist (GUIDE 3.2). Silent
    when no other rank says its world size, when the key names no rank, or when the key's rank
    lies inside every world size given."""
    for w in view.col.store_waits:
        waiter = view.rank(w.hit)
        wanted = [int(r) for r in (x.key_rank(k, gloo=True) for k in w.keys) if r is not None]
        said = {r: n for r, n in view.col.worlds.items() if r != waiter and r.isdigit()}
        if waiter is None or not wanted or not said or max(wanted) < max(said.values()):
            continue
        if view.col.worlds.get(waiter, max(wanted) + 1) <= max(wanted):
            continue  # its own lines give a world that holds no such rank: the key is not its
        other = min(said, key=int)
        return {"ranks": [waiter], "role": "misconfigured", "rule": "DL918",
                "why": tr("rank {waiter} waited in the store for the key of rank {wanted}, but rank {other}'s own "
                          "lines give the job {n} ranks: rank {waiter} was started with a larger world size",
                          waiter=waiter, wanted=max(wanted), other=other, n=said[other])}
    return None


def _store_named(view: View, lines: dict[str, RankLine]) -> dict[str, Any] | None:
    """The waiters name the late rank through the store keys they gave up on: a key that names a
    rank (`/index/rank1`) is written by that rank, so a rank whose key was waited for and who did
    not itself wait out a timeout is the late one. A list that names the waiters' own keys too (a
    whole-group wait) names the late rank only by elimination: then every rank left must have
    lines of its own (an excerpt may lack another waiter's), and the culprit is `inferred` (never
    confirmed). Silent when the keys name no rank, or name only ranks seen waiting."""
    waits = [w for w in view.col.store_waits if w.keys]
    waiters = {r for w in view.col.store_waits for r in [view.rank(w.hit)] if r is not None and r.isdigit()}
    timed = {r for r, rl in lines.items() if rl.end.kind == "timeout"}
    named: dict[str, Any] = {}
    whole = False
    for w in waits:
        ranks = {r for r in map(x.key_rank, w.keys) if r is not None}
        whole = whole or bool(ranks & waiters)
        for r in ranks:
            named.setdefault(r, w.hit)
    late = sorted(set(named) - waiters - timed, key=int)
    if not late:
        return None
    inferred = whole or len(late) > 1
    if inferred and any(r not in lines and r not in view.col.last_ts for r in late):
        return None
    hit = named[late[0]]
    found: dict[str, Any] = {
        "ranks": late, "role": "stuck", "rule": "DL911",
        "why": tr("rank {waiters} gave up waiting in the store for the key of rank {ranks} ({where}): "
                  "rank {ranks} was late to write it", waiters=", ".join(sorted(waiters, key=int)) or "?",
                  ranks=", ".join(late), where=f"{short(hit.file)}:{hit.line}")}
    if inferred:
        found["inferred"] = True
    return found








def _earliest_exit(exited: list[RankLine]) -> RankLine:
    return min(exited, key=lambda rl: rl.end.hit.order if rl.end.hit else (1 << 30, 0))


def _uneven(view: View, waiters: list[RankLine]) -> dict[str, Any] | None:
    """Ranks that said they hold more batches per epoch than the others, when someone was left
    waiting: they kept calling collectives after the others ran out (GUIDE 4.1, uneven inputs)."""
    sizes = {r: n for r, (n, _hit) in view.col.epoch_sizes.items()}
    if not waiters or len(set(sizes.values())) < 2:
        return None
    most = max(sizes.values())
    ranks = sorted((r for r, n in sizes.items() if n == most), key=int)
    others = ", ".join(tr("rank {rank}: {n}", rank=r, n=n) for r, n in sorted(sizes.items(), key=lambda kv: int(kv[0])) if n != most)
    return {"ranks": ranks, "role": "stuck", "rule": "DL902",
            "why": tr("rank {ranks} has {most} batches per epoch ({others}): it kept calling collectives "
                     "after the others ran out of data", ranks=", ".join(ranks), most=most, others=others)}


def _odd_facts(view: View) -> dict[str, Any] | None:
    for fact in ("nccl_version", "bootstrap_if", "net_if"):
        values: dict[str, list[str]] = {}
        for r, facts in view.facts.items():
            if fact in facts and r.isdigit():
                val = facts[fact].split(":")[0] if fact != "nccl_version" else facts[fact]
                values.setdefault(val, []).append(r)
        if len(values) > 1:
            counts = Counter({v: len(rs) for v, rs in values.items()})
            (top, n), *_ = counts.most_common()
            if list(counts.values()).count(n) == 1:
                odd = sorted((r for v, rs in values.items() if v != top for r in rs), key=lambda r: int(r))
                return {"ranks": odd, "role": "misconfigured", "rule": "DL909",
                        "why": tr("{fact} is {top} on most ranks but differs on rank {ranks}", fact=fact,
                                 top=top, ranks=", ".join(odd))}
    return None


def _odd_resume(view: View) -> dict[str, Any] | None:
    """The rank that resumed from another point than most ranks announced (GUIDE 4.4): its state
    differs from theirs. Silent when all agree, when one rank announces, and on a 1:1 split."""
    odd = odd_resume(view.col)
    if not odd:
        return None
    said = x.resume_text(view.col.resume[odd[0]][0])
    return {"ranks": odd, "role": "misconfigured", "rule": "DL913",
            "why": tr("rank {ranks} resumed from {point}, the other ranks from another point",
                      ranks=", ".join(odd), point=said)}


def _broadcast_root(view: View, lines: dict[str, RankLine], waiters: list[RankLine]) -> dict[str, Any] | None:
    """Rank 0 when the waiters timed out in a broadcast and rank 0 shows no failure of its own: a
    broadcast waits on its root, and torch's broadcasts take rank 0 by default (DDP's state and
    buffer sync, broadcast_object_list(src=0), the libraries' broadcast from the main process).
    Inferred; silent when rank 0 timed out in it too, ended of its own, another op timed out, the
    broadcast ran in a subgroup (`[PG ID 2 ...]`: its root is the group's, not rank 0), or another
    rank of a known world is unaccounted for."""
    ops = {(rl.last_collective or {}).get("op") for rl in waiters} | {t.op for t in view.unranked}
    groups = {(rl.last_collective or {}).get("pg", "0") for rl in waiters} | {t.pg for t in view.unranked}
    zero = lines.get("0")
    if ops != {"BROADCAST"} or groups != {"0"} or zero is not None and zero.end.kind != "unknown":
        return None
    world = view.col.world if 0 < view.col.world <= 65536 else 0
    if {str(i) for i in range(1, world)} - {rl.rank for rl in waiters}:
        return None  # another rank the world holds is unaccounted for: it could be the one they waited on
    ranks = [rl.rank for rl in waiters]
    return {"ranks": ["0"], "role": "stuck", "rule": "DL917", "inferred": True,
            "why": tr("rank {waiters} timed out in a broadcast, which waits on its root, while rank 0, the root torch's "
                      "broadcasts take by default, shows no failure of its own: it was the late one",
                      waiters=names(waiters)) if ranks else
            tr("the waiters timed out in a broadcast, which waits on its root, while rank 0, the root torch's "
               "broadcasts take by default, shows no failure of its own: it was the late one")}


def _store_client(view: View, lines: dict[str, RankLine]) -> dict[str, Any] | None:
    """Rank 1, the one client rank 0's store waited for in a world of two (peers.store_client_missing)."""
    if not peers.store_client_missing(view, lines):
        return None
    return {"ranks": ["1"], "role": "misconfigured", "rule": "DL916", "inferred": True,
            "why": tr("rank 0's store waited for its one client while a process could not connect to the store: in a "
                      "world of 2 that client is rank 1, which could not reach rank 0's store (its MASTER_ADDR or "
                      "MASTER_PORT, or the route)")}


def _earliest(crashed: list[RankLine]) -> RankLine:
    stamped = [rl for rl in crashed if rl.end.hit is not None and rl.end.hit.ts is not None]
    if len(stamped) == len(crashed) and len({rl.end.hit.ts[0] for rl in stamped}) == 1:  # type: ignore[union-attr]
        return min(stamped, key=lambda rl: rl.end.hit.ts[1])  # type: ignore[union-attr]
    # no common clock: a rank's own exception beats a kill signal, then reading order
    return min(crashed, key=lambda rl: (rl.end.kind != "crashed", rl.end.exc is None,
                                        rl.end.hit.order if rl.end.hit else (1 << 30, 0)))


__all__ = ["culprit", "summary", "short"]
