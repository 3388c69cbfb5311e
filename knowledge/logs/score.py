"""Scoring: signature weights, structural evidence across ranks, and the symptom's shift."""
from __future__ import annotations

from collections import defaultdict

from ..diagnosis import symptom_priors
from ..i18n import t as tr
from ..lazyre import lazy
from ..model import KnowledgeBase
from ..ranks import rank_key, span
from . import extract as x, peers
from .records import Hit
from .report import CauseScore, Evidence
from .setup_rules import (
    fact_rules,
    hardware_rules,
    launch_rules,
    path_rules,
    waiter_ops,
    waits_apart,
)
from .tally import BASES, Scores
from .timeline import RankLine, exceptions_unranked, handled, only_waits_raised, restarted
from .view import View

REST = 0.25  # each further distinct signature of a cause adds this share of its weight
SHIFT = 1.0  # the symptom's strongest prior adds this much to a cause that has evidence
MAX_EVIDENCE = 10
PRIOR = 0.5  # a symptom prior alone is worth less than any line that shows the failure
# a rank's own failure that says it ran out of memory: PyTorch's and the CUDA driver's OOM, c10's CPU
# allocator ("DefaultCPUAllocator: can't allocate memory"), ENOMEM's strerror, Python's MemoryError
# checks across ranks whose failure says the ranks differ (signatures.toml): the crash is the check
# catching the divergence, so the deadlock it leaves is no answer of its own
CROSS_RANK_CHECKS = ("ddp-params-differ-across-ranks",)
OUT_OF_MEMORY = lazy(r"out of memory|OutOfMemoryError|can't allocate memory|Cannot allocate memory"
                     r"|\bMemoryError\b|CUDA_ERROR_OUT_OF_MEMORY")


def score(view: View, kb: KnowledgeBase, symptom: str | None,
          lines: dict[str, RankLine] | None = None, who: dict | None = None, named_by: str = "") -> list[CauseScore]:
    """The ranked causes; `who` is the culprit and `named_by` the culprit rule that named it."""
    s = Scores()
    lines = lines or {}
    _signatures(view, s, _late_to_store(view, lines, who), _finished_at(view, lines), _all_waited(lines))
    _crash_rules(view, s, _kind(kb, symptom), lines, who)
    if not _main_work_rule(view, s, lines):
        _timeout_rules(view, s, lines, who, named_by)
    fact_rules(view, s)
    hang = None if symptom is None else _kind(kb, symptom) == "hang"
    path_rules(view, s, hang, lines, who)
    hardware_rules(view, s, hang)
    launch_rules(view, s)
    _shift(kb, refine(kb, view, symptom), s, stage(view))
    if symptom is None and "evidence" not in s.basis.values():
        # no failure line and no symptom: nothing to explain, so context lines and facts are not
        # offered as causes (a healthy torchrun log has a banner and identical all-reduced losses)
        return []
    order = {cid: n for n, cid in enumerate(kb.causes)}
    out = []
    for cid, val in s.score.items():
        if val <= 0:
            continue
        ev: list[Evidence] = []
        seen: set[tuple[str, int]] = set()
        for h in s.evidence[cid]:  # one entry per line, however many rules cited it
            if (h.file, h.line) not in seen and len(ev) < MAX_EVIDENCE:
                seen.add((h.file, h.line))
                ev.append(Evidence(h.file, h.line, h.text, view.rank(h), h.sig))
        basis = s.basis.get(cid, "prior")
        out.append(CauseScore(cid, round(val, 3), ev, s.reasons[cid], lead=basis != "evidence",
                              basis=basis, against=s.against.get(cid, []), weight=s.decisive.get(cid, 0.0),
                              rules=list(s.rules.get(cid, []))))
    out.sort(key=lambda c: (BASES.index(c.basis) if c.basis == "prior" else 0, -c.score, -s.best[c.id],
                            order.get(c.id, len(order)), c.id))
    return out


def _kind(kb: KnowledgeBase, symptom: str | None) -> str | None:
    if not symptom:
        return None
    sym = kb.symptoms.get(symptom)
    if sym is not None:
        return sym.kind
    return "hang" if symptom.startswith("hang") else "error" if symptom.startswith("error") else None


def _late_to_store(view: View, lines: dict[str, RankLine], who: dict | None) -> list[str]:
    """The stuck culprit's ranks when the store keys the waiters gave up on name them and their own
    lines show them running: they were started with their rank and came late (else [])."""
    if not who or who["role"] != "stuck":
        return []
    named = {x.key_rank(k) for w in view.col.store_waits for k in w.keys}
    ranks = [str(r) for r in who["ranks"]]
    alive = all(r in lines or r in view.col.last_ts for r in ranks)
    return ranks if ranks and set(ranks) <= named and alive else []


def _finished_at(view: View, lines: dict[str, RankLine]) -> dict[str, int]:
    """When every rank the logs show reached its finish: per file, the line of the last finish in
    it (a finish line or teardown), else {}. What a process no rank owns prints after that in the
    same file is the launcher's own teardown (torchrun's exit barrier on a node whose store host
    left first), not a failure of the job."""
    if not lines or any(rl.end.kind != "finished" for rl in lines.values()):
        return {}
    out: dict[str, int] = {}
    hits = [h for h in view.hits_with("end") if view.rank(h) in lines]
    hits += [h for r, (ph, h) in view.col.phases.items() if ph == "teardown" and r in lines]
    for h in hits:
        out[h.file] = max(out.get(h.file, 0), h.line)
    return out


def _signatures(view: View, s: Scores, late: list[str] | None = None, finished: dict[str, int] | None = None,
                waited: bool = False) -> None:
    """Every signature's weight to its cause. A line read as a store wait that gave up is a wait
    (the store answered): a signature that reads it as anything else (a socket timeout as a network
    fault) does not count; and when its keys name a `late` rank seen running, a wait signature's
    reading ("a rank never arrived") does not either: that rank arrived, late (rule DL911)."""
    per_cause: dict[str, list[tuple[float, str]]] = defaultdict(list)
    failing: set[str] = set()
    waits = {(w.hit.file, w.hit.line) for w in view.col.store_waits}
    kept = {sid: [h for h in hits if ((h.file, h.line) not in waits or "wait" in view.sigs[sid].tags and not late)
                  and not _teardown(view, h, finished)]
            for sid, hits in view.col.hits.items()}
    if late and any(len(kept[sid]) < len(hs) for sid, hs in view.col.hits.items() if hs):
        s.against["rank-env-mismatch"].append(tr("rank {ranks} wrote lines of its own: it started with its "
                                                 "rank and came late to the store", ranks=span(late)))
    for sid, hits in kept.items():
        if hits:
            sig = view.sigs[sid]
            if "context" in sig.tags and ("launcher" in sig.tags or "spawn" in sig.tags):
                continue  # a launcher banner or a spawn alone is not two launchers: only the rules may use them
            if "multi-node" in sig.tags and view.one_host:
                continue  # NCCL sends nothing between GPUs of one host over this interface
            per_cause[sig.cause].append((sig.weight, sid))
            # the launcher's record of an exit when every rank ended waiting: the waiters' own exits
            exits = waited and _exit_record(view, sid)
            if "context" not in sig.tags and not exits and not all(handled(view, h) for h in hits):
                failing.add(sig.cause)
                s.decisive[sig.cause] = max(s.decisive.get(sig.cause, 0.0), sig.weight)
    for cause, ws in per_cause.items():
        ws.sort(reverse=True)
        s.best[cause] = ws[0][0]
        total = ws[0][0] + REST * sum(w for w, _ in ws[1:])
        names = ", ".join(f"{sid} x{view.col.counts[sid]}" for _, sid in ws)
        hits = []
        for _, sid in ws:  # one line of each signature first, then the rest
            hits.extend(kept[sid][:2])
        for _, sid in ws:
            hits.extend(h for h in kept[sid][2:5] if h not in hits)
        s.add(cause, total, tr("signatures: {names}", names=names), hits, "evidence" if cause in failing else "facts")


def _teardown(view: View, h: Hit, finished: dict[str, int] | None) -> bool:
    """A line no rank owns, after every rank's finish in its file (see _finished_at)."""
    return bool(finished) and view.rank(h) is None and h.line > (finished or {}).get(h.file, 1 << 62)


def _crash_rules(view: View, s: Scores, kind: str | None, lines: dict[str, RankLine],
                 who: dict | None) -> None:
    """A rank that failed on its own while others waited for it (GUIDE 1): the crashed rank comes
    from the timeline (its own traceback, OOM, segfault or kill), the waiters from their timeouts
    and lost-peer errors. Never fires on a handled exception (progress after it) or on a waiter."""
    crashed = who is not None and who["role"] == "crashed"
    if who is not None and who["role"] in ("stuck", "slow"):
        return  # the exit lines are the launcher stopping the ranks that waited for the stuck one
    crashes = _root_crashes(view, lines)
    if not crashed and not crashes:
        lost = [rl for rl in lines.values() if rl.end.kind == "lost-peer"]
        unranked = [e for e in exceptions_unranked(view) if not _signed(view, e.hit)]
        if lost and not any(rl.end.kind == "timeout" for rl in lines.values()):
            # a closed connection: the peer's process is gone, whoever it was
            s.add("rank-crash-deadlock", 2.0, tr("rank {ranks} lost its peer: the process on the other end "
                  "exited", ranks=span([rl.rank for rl in lost])), [rl.end.hit for rl in lost[:2] if rl.end.hit is not None],
                  rule="DL105")
        elif unranked:
            e = unranked[0]
            s.add("rank-crash-deadlock", 1.0, tr("a process raised {type}: whichever rank it was, the others "
                  "are left waiting for it", type=e.type), [e.hit], rule="DL106")
        return
    waiters = [rl for rl in lines.values() if rl.end.kind in ("timeout", "lost-peer")]
    hits = []
    if crashed:
        rl = lines.get(who["ranks"][0])  # type: ignore[index]
        hits = [rl.end.hit] if rl is not None and rl.end.hit is not None else []
    hits += [h for h in crashes[:3] if h not in hits]
    max_w = max((view.sigs[h.sig].weight for h in crashes), default=2.0)
    s.add("rank-crash-deadlock", 0.4 * max_w, "", hits, rule="DL101")
    waits = [t for per in view.timeouts.values() for t in per.values()] + view.unranked
    mismatch = [h for sid, hs in view.col.hits.items() if view.sigs[sid].cause == "asymmetric-collective"
                and "failure" in view.sigs[sid].tags for h in hs]
    differ = [h for sid in CROSS_RANK_CHECKS for h in view.col.hits.get(sid, ())]
    if mismatch:
        s.against["rank-crash-deadlock"].append(tr("the crash is a collective mismatch detected at run time"))
    elif differ:
        s.against["rank-crash-deadlock"].append(tr("the crash is a check across ranks that found them configured "
                                                   "differently"))
    elif waiters or waits or view.hits_with("wait"):
        named = tr("rank {rank}", rank=who["ranks"][0]) if crashed else tr("a process")  # type: ignore[index]
        n = len(waiters) or len(waits)
        s.add("rank-crash-deadlock", 4.0, tr("{who} crashed while {n} rank(s) waited in a collective", who=named,
                                            n=n or tr("other")),
              hits[:3] + [rl.end.hit for rl in waiters[:2] if rl.end.hit is not None] + _timeout_hits(view)[:2],
              rule="DL102")
        first = lines.get("0")
        if crashed and who["ranks"] == ["0"] and first is not None and first.phase in ("eval", "save", "load"):  # type: ignore[index]
            # GUIDE 4.2: rank 0 runs out of memory in the work it does alone. Then that work explains
            # the crash and the OOM, and it ranks above both (a consequence never outranks its cause)
            oom = first.end.kind == "crashed" and OUT_OF_MEMORY.search(first.end.detail) is not None
            amount = max(s.score["rank-crash-deadlock"], s.score["cuda-oom"]) + 1.0 if oom else 2.5
            s.add("rank0-overload", amount, tr("rank 0 ran out of memory first, during {phase}" if oom else
                                               "rank 0 crashed first, during {phase}", phase=tr(first.phase)),
                  hits[:2], rule="DL201")
    elif crashed:
        s.add("rank-crash-deadlock", 1.0 if kind == "hang" else 0.5,
              tr("rank {rank} crashed: the other ranks are left waiting for it", rank=who["ranks"][0]),  # type: ignore[index]
              hits[:3], rule="DL103")
    elif kind == "hang":
        s.add("rank-crash-deadlock", 1.5, tr("a process crashed and the job hung: the others wait for it"), crashes[:3],
              rule="DL104")


def _all_waited(lines: dict[str, RankLine]) -> bool:
    """Every rank the logs show ended waiting (a timeout or a lost peer)."""
    return bool(lines) and all(rl.end.kind in ("timeout", "lost-peer") for rl in lines.values())


def _exit_record(view: View, sid: str) -> bool:
    """A signature that reads only the launcher's record of an exit (an exit code, its summary)."""
    return sid.startswith("crash-exitcode") or "consequence" in view.sigs[sid].tags


def _root_crashes(view: View, lines: dict[str, RankLine]) -> list[Hit]:
    """The crash lines that are failures of their own, first-ranked first. A line that announced a
    rank's exit is no crash when the rank's own end was a wait (mp.spawn reports "Process N
    terminated with the following error" for a timeout too); nor is an exit code when every rank
    the logs show ended waiting: a waiter that gave up exits non-zero too; nor is a crash of an
    attempt the launcher restarted and the run then finished."""
    waited = _all_waited(lines) or only_waits_raised(view)
    return sorted((h for h in view.crashes if not _ended_waiting(view, h, lines)
                   and not (waited and _exit_record(view, h.sig)) and not restarted(view, h)),
                  key=lambda h: (view.rank(h) is None, h.order))


def _ended_waiting(view: View, hit: Hit, lines: dict[str, RankLine]) -> bool:
    """Whether the rank a crash line names (its writer, or the process mp.spawn names) ended in a
    wait of its own: a timeout or a lost peer."""
    m = x.SPAWN_ERROR.search(hit.text)
    rl = lines.get(view.rank(hit) or (m.group("i") if m else ""))
    return rl is not None and rl.end.kind in ("timeout", "lost-peer")


def _signed(view: View, hit: Hit) -> bool:
    """Whether a failure signature already names the cause of this line (an NCCL error, an OOM):
    then the line is that cause's evidence, not a generic crash."""
    return any(h.file == hit.file and h.line == hit.line and "context" not in view.sigs[sid].tags
               for sid, hs in view.col.hits.items() for h in hs)


def _timeout_hits(view: View) -> list[Hit]:
    out = []
    for per in view.timeouts.values():
        for r, t in sorted(per.items(), key=lambda kv: rank_key(kv[0])):
            out.append(Hit("watchdog-timeout", t.file, t.line, t.text, r, None, t.ts, (0, t.line)))
    for t in view.unranked:
        out.append(Hit("watchdog-timeout", t.file, t.line, t.text, None, None, t.ts, (0, t.line)))
    return out


def _main_work_rule(view: View, s: Scores, lines: dict[str, RankLine]) -> bool:
    """GUIDE 4.2: work only the main process does (HF's main_process_first, tokenising, caching)
    while another rank ended without a failure of its own (a timeout, a lost peer, or only an
    exit code): that rank was waiting for rank 0. Never when a rank failed on its own."""
    main_work = view.hits_with("main-work")
    if not main_work or any(rl.end.kind in ("crashed", "killed") for rl in lines.values()):
        return False
    waited = [rl for rl in lines.values() if rl.rank != "0" and rl.end.kind in ("timeout", "lost-peer", "exited")]
    timed = [e for e in view.col.exceptions if e.peer_loss and not e.launcher]
    # or a wait line of another rank's own (a store wait past its timeout)
    timed_hits = [e.hit for e in timed] + [h for h in view.hits_with("wait") if view.rank(h) not in (None, "0")]
    if not waited and not timed_hits and not view.timeouts and not view.unranked:
        return False
    who = tr("rank {ranks}", ranks=span([rl.rank for rl in waited])) if waited else tr("another rank")
    s.add("rank0-overload", 6.0, tr("{who} ended waiting while the main process did work only it does ({line})",
                                   who=who, line=main_work[0].text.strip()[:60]), main_work[:2] + [rl.end.hit for rl in waited[:1] if rl.end.hit]
          + timed_hits[:1], rule="DL202")
    return True


def _timeout_rules(view: View, s: Scores, lines: dict[str, RankLine], who: dict | None, named_by: str = "") -> None:
    lost = [rl for rl in lines.values() if rl.end.kind == "lost-peer"]
    waited = [e for e in view.col.exceptions if e.peer_loss and not e.launcher]
    if not view.timeouts and not view.unranked and not lost and not waited:
        return
    # a culprit known only from the launcher's exit code explains nothing: a waiter exits too
    own = bool(who and who["role"] == "crashed" and lines.get(who["ranks"][0]) is not None
               and lines[who["ranks"][0]].end.kind != "exited")
    waited = _all_waited(lines)  # then the exit records are the waiters' own exits
    crashed = any(not (waited and _exit_record(view, h.sig)) for h in view.crashes)
    explained = own or crashed and not (who and who["role"] in ("stuck", "slow")) \
        or len(waiter_ops(view, lines)) > 1 or waits_apart(lines, view.col.world) is not None
    for pg, per in view.timeouts.items():
        seqs = {r: t.seq for r, t in per.items() if t.seq is not None}
        by_seq: dict[int, set[str]] = defaultdict(set)
        for t in per.values():
            if t.seq is not None and t.op:
                by_seq[t.seq].add(t.op)
        if len(set(seqs.values())) > 1:
            lo, hi = min(seqs.values()), max(seqs.values())
            behind = sorted((r for r, q in seqs.items() if q == lo), key=rank_key)
            ahead = sorted((r for r, q in seqs.items() if q == hi), key=rank_key)
            ev = _timeout_lines(view, pg, behind[:1] + ahead[:1])
            s.add("asymmetric-collective", 4.5,
                  tr("ranks timed out at different SeqNums in PG {pg}: rank {behind} at {lo}, rank {ahead} at "
                    "{hi}: they issued different collectives", pg=pg, behind=span(behind), lo=lo,
                    ahead=span(ahead), hi=hi), ev, rule="DL401")
            explained = True
        elif any(len(ops) > 1 for ops in by_seq.values()):
            seq = next(q for q, ops in by_seq.items() if len(ops) > 1)
            rs = [r for r, t in per.items() if t.seq == seq]
            s.add("asymmetric-collective", 4.5,
                  tr("ranks at SeqNum {seq} ran different collectives: {ops}", seq=seq,
                    ops=", ".join(sorted(by_seq[seq]))),
                  _timeout_lines(view, pg, rs[:3]), rule="DL402")
            explained = True
    done = [rl for rl in lines.values() if rl.end.kind == "finished"]
    stranded = [rl for rl in lines.values() if rl.end.kind in ("timeout", "lost-peer")]
    if done and stranded and not explained:
        s.add("asymmetric-collective", 4.5, tr("rank {done} finished while rank {stranded} still waited in a "
              "collective: the ranks ran different numbers of steps (uneven inputs, or a collective not every "
              "rank calls)", done=span([rl.rank for rl in done]), stranded=span([rl.rank for rl in stranded])),
              [rl.end.hit for rl in stranded[:2] if rl.end.hit is not None], rule="DL403")
        explained = True
    ends = [f for f in view.col.files if f.ends and f.first_timeout and min(f.ends) < f.first_timeout]
    if ends:
        f = ends[0]
        end_hits = [h for h in view.hits_with("end") if h.file == f.name][:1]
        s.add("asymmetric-collective", 4.5, tr("a collective timed out after training had finished on "
              "this rank: the others never entered it"), end_hits + _timeout_hits(view)[:1], rule="DL404")
        explained = True
    waiting = view.waiting | {rl.rank for rl in lines.values() if rl.end.kind in ("timeout", "lost-peer")}
    zero = lines.get("0")
    # a rule never points at rank 0 against a culprit the evidence names (uneven inputs, the
    # waiters' own words): only an inferred culprit, or rank 0 itself, leaves room for it
    other = bool(who and who.get("ranks") and "0" not in who["ranks"] and not who.get("inferred"))
    if not explained and not other and zero is not None and "0" not in waiting and zero.end.kind != "finished" \
            and waiting:
        # GUIDE 4.2: the others time out while rank 0 does extra work. Only rank 0's own lines can
        # show that work; its absence from an excerpt shows nothing.
        busy = zero.phase in ("eval", "save", "load", "dataloader")
        ranks = sorted((r for r in waiting if r.isdigit()), key=rank_key)
        s.add("rank0-overload", 6.0 if busy else 2.0,
              tr("rank {ranks} timed out waiting while rank 0's own lines show it in {phase}", ranks=span(ranks),
                phase=tr(str(zero.phase))) if busy else
              tr("rank {ranks} timed out waiting while rank 0's own lines show no timeout", ranks=span(ranks)),
              _timeout_hits(view)[:2]
              + ([view.col.phases["0"][1]] if "0" in view.col.phases else []), "evidence" if busy else "facts",
              rule="DL203" if busy else "DL204")
        explained = busy
    stuck = who is not None and who["role"] in ("stuck", "slow")
    if not explained:
        hits = _timeout_hits(view)[:2] + [rl.end.hit for rl in lost[:2] if rl.end.hit is not None]
        # a lost peer alone is a crash on the other end (rank-crash-deadlock), not a timeout
        only_lost = bool(lost) and not view.timeouts and not view.unranked and all(
            rl.end.kind != "timeout" for rl in lines.values())
        busy = working = False
        if stuck and who["ranks"] == ["0"]:  # type: ignore[index]
            busy = zero is not None and zero.phase in ("eval", "save", "load", "dataloader")
            # its own clock shows it printing after the waiters' last lines: alive, at work of its
            # own rather than hung (a hung rank 0 prints nothing; a slow one prints its steps)
            working = zero is not None and not busy and peers.own_lines_show_it(
                zero, [rl for rl in lines.values() if rl.end.kind in ("timeout", "lost-peer") and rl.rank != "0"])
            if busy:
                # GUIDE 4.2: the waiters name rank 0 and its own last lines show work only it does
                s.add("rank0-overload", 6.0, tr("rank 0 is the one rank that never reached the collective, and its own "
                      "last lines show it in {phase}", phase=tr(str(zero.phase))),  # type: ignore[union-attr]
                      hits[:1] + ([view.col.phases["0"][1]] if "0" in view.col.phases else []), rule="DL206")
            elif working:
                s.add("rank0-overload", 6.0, tr("rank 0 is the one rank that never reached the collective, and its own "
                      "lines go on after the others had stopped: it was at work of its own"),
                      hits[:1] + ([zero.end.hit] if zero.end.hit else []), rule="DL206")  # type: ignore[union-attr]
            else:
                s.add("rank0-overload", 4.0, tr("rank 0 is the one rank that never reached the collective: "
                      "the rank that does extra work (eval, saving, logging)"), hits[:1], "facts", rule="DL206")
        # rank 0 named the root of a timed-out broadcast with no line of its own (DL917): late for work
        # only it does, or stuck for another reason, fit alike (DL206's lead); the naming adds nothing
        if stuck and (busy or working) and who["ranks"] == ["0"]:  # type: ignore[index]
            # GUIDE 4.2: rank 0's own work is why the others timed out; the timeout is its consequence
            s.against["collective-timeout"].append(tr("rank 0 was late at work of its own: that explains the timeout"))
        elif stuck and not (named_by == "DL917" and zero is None):
            s.add("collective-timeout", 3.0, tr("rank {ranks} {role}: {why}", ranks=span(who["ranks"]),  # type: ignore[index]
                                               role=tr(who["role"]), why=who["why"]), hits,  # type: ignore[index]
                  rule="DL301")
        elif not only_lost:
            s.add("collective-timeout", 1.0, tr("collectives timed out with no crashed rank in sight"), hits,
                  rule="DL302")
    elif crashed or (who and who["role"] == "crashed"):
        s.against["collective-timeout"].append(tr("a rank crashed first: the timeouts are its consequence"))


def not_waiting(view: View) -> list[str]:
    waiting = view.waiting
    world = view.col.world or 0
    known = {r for r in view.col.seen if r.isdigit()} | ({str(i) for i in range(world)} if world <= 65536 else set())
    return sorted(known - waiting, key=rank_key)


def _timeout_lines(view: View, pg: str, ranks: list[str]) -> list[Hit]:
    per = view.timeouts.get(pg, {})
    return [Hit("watchdog-timeout", per[r].file, per[r].line, per[r].text, r, None, per[r].ts, (0, 0))
            for r in ranks if r in per]


HANG_AT = {"first-step": "hang-first-step", "mid-training": "hang-mid-training", "save-eval": "hang-save-eval"}


def stage(view: View) -> str | None:
    """Where the logs stop, whatever the symptom (GUIDE 5, step 1): steps printed, or a watchdog's
    SeqNum past the first collectives -> mid-training (save-eval when the ranks' last lines are a
    save or an eval); no collective ever completed (SeqNum 1 or 2), or ranks through init (NCCL set
    up its transports, a rank announced itself) but no step -> first-step; no sign of init having
    completed and a rank's last lines in init itself (init_process_group, the rendezvous, the
    store) -> init; else None (unknown). A place in the run, never evidence for one cause."""
    col = view.col
    phases = {ph for ph, _hit in col.phases.values()}
    seqs = [t.seq for per in view.timeouts.values() for t in per.values() if t.seq is not None]
    if seqs and max(seqs) <= 2:  # no collective ever completed: the first one
        return "first-step"
    if col.progress or seqs and min(seqs) > 2:
        return "save-eval" if phases & {"save", "eval"} else "mid-training"
    if col.world or col.announce or any("nccl_version" in f or "net_if" in f for f in col.facts.values()):
        return "first-step"  # ranks got through init
    return "init" if "init" in phases else None


def refine(kb: KnowledgeBase, view: View, symptom: str | None) -> str | None:
    """A plain symptom made precise by the logs (GUIDE 5, step 1's sub-symptoms). An error (or no
    symptom given) whose only failure lines are NCCL's catch-all return codes is NCCL's
    "unhandled system/cuda error". A hang by how far the logs got: steps printed ->
    mid-training (or save/eval when that is where the lines stop); ranks initialised but no
    step -> the first forward/backward; a watchdog's SeqNum tells the same. Unknown progress keeps
    "hang"."""
    if symptom in (None, "error"):
        failing = [sid for sid, hs in view.col.hits.items() if hs and "failure" in view.sigs[sid].tags]
        if failing and all("catch-all" in view.sigs[sid].tags for sid in failing) \
                and "error-unhandled" in kb.symptoms:
            return "error-unhandled"
        if symptom and failing and all("wait" in view.sigs[sid].tags for sid in failing) \
                and "error-watchdog" in kb.symptoms:
            return "error-watchdog"
        return symptom
    if symptom != "hang":
        return symptom
    sub = HANG_AT.get(stage(view) or "")
    if sub is None:
        return symptom
    return sub if sub in kb.symptoms else symptom


def _shift(kb: KnowledgeBase, symptom: str | None, s: Scores, at: str | None = None) -> None:
    """The symptom's priors (the one formula: diagnosis.symptom_priors, with where the logs stop)
    added to the causes. Where the logs stop weighs only the causes with nothing else for them: a
    cause with lines of its own takes the symptom's prior alone (a place in the run is no evidence)."""
    plain = symptom_priors(kb, symptom)
    for cid, w in symptom_priors(kb, symptom, at).items():
        if s.score.get(cid, 0) > 0:
            if cid in plain:
                s.add(cid, SHIFT * plain[cid], "", basis=s.basis.get(cid, "prior"))
        elif cid != "other":
            # GUIDE 5: a hang points first at deadlocks and process-count mismatches, an error at
            # versions, network and topology. A prior, shown as such, never as evidence.
            s.add(cid, PRIOR * w, tr("the symptom {symptom} points here first", symptom=symptom),
                  basis="prior")
