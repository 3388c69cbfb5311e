"""Rules on how the ranks were set up and which path each took: versions and interfaces that
differ across ranks, transports, collectives the waiters stopped in, uneven inputs, steps apart,
shared sample ids, resumes that differ, and two launchers in one job."""
from __future__ import annotations

from collections import defaultdict

from ..i18n import t as tr
from ..ranks import rank_key, span
from . import extract as x
from .collect import Collector
from .records import Hit
from .tally import Scores
from .timeline import RankLine
from .tocollect import barrier_count
from .view import View


def fact_rules(view: View, s: Scores) -> None:
    values = fact_values(view)
    for fact, cause, amount, rule in (("nccl_version", "version-mismatch", 4.0, "DL501"),
                                      ("nccl_cuda", "version-mismatch", 2.0, "DL502"),
                                      ("cuda_driver", "version-mismatch", 2.0, "DL503")):
        if len(values.get(fact, {})) > 1:
            s.add(cause, amount, tr("{fact} differs across ranks: {values}", fact=fact,
                                    values=_values_text(values[fact])),
                  _fact_evidence(view, fact, values[fact]), rule=rule)
    names = {}
    for fact in ("bootstrap_if", "net_if"):
        for val, ranks in values.get(fact, {}).items():
            names.setdefault(val.split(":")[0], []).extend(ranks)
    multi_host = len(view.col.hosts) > 1 or view.col.nodes > 1
    if len(names) > 1:
        s.add("nic-selection", 2.5, tr("ranks use different interfaces: {values}", values=_values_text(names)),
              _fact_evidence(view, "bootstrap_if", values.get("bootstrap_if", {}))
              + _fact_evidence(view, "net_if", values.get("net_if", {})), rule="DL504")
    bad = []
    for fact in ("bootstrap_if", "net_if"):
        for val in values.get(fact, {}):
            name, _, addr = val.partition(":")
            if x.VIRTUAL_IF.match(name) or x.UNROUTABLE_ADDR.match(addr):
                bad.append((fact, val))
    if bad and not view.one_host:  # between GPUs of one host NCCL uses P2P or SHM, not the NIC
        fact, val = bad[0]
        s.add("nic-selection", 3.0 if multi_host else 1.0,
              tr("NCCL uses {value} across nodes" if multi_host else "NCCL uses {value}", value=val),
              _fact_evidence(view, fact, {val: values[fact][val]}), "evidence" if multi_host else "facts",
              rule="DL505")
    transports = defaultdict(list)
    for r, f in view.facts.items():
        net = f.get("network", "")
        if f.get("ib") == "none" or net.startswith("Socket"):
            transports["sockets"].append(r)
        elif (f.get("ib") and f.get("ib") != "none") or net.startswith("IB"):
            transports["InfiniBand"].append(r)
    if len(transports) > 1:
        s.add("ib-rdma-failure", 3.5, tr("some ranks use InfiniBand, others fell back to sockets: {values}",
                                         values=_values_text(transports)), [view.fact_hits[(r, k)] for r in transports["sockets"][:1]
                                           for k in ("ib", "network") if (r, k) in view.fact_hits],
              rule="DL506")


def fact_values(view: View) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for r, facts in view.facts.items():
        for k, val in facts.items():
            out[k][val].append(r)
    return {k: {val: sorted(rs, key=rank_key) for val, rs in d.items()} for k, d in out.items()}


def _fact_evidence(view: View, fact: str, vals: dict[str, list[str]]) -> list[Hit]:
    return [view.fact_hits[(rs[0], fact)] for rs in vals.values() if (rs[0], fact) in view.fact_hits][:4]


def _values_text(vals: dict[str, list[str]]) -> str:
    return tr("; ").join(tr("{value} on rank {ranks}", value=v, ranks=span(rs)) for v, rs in vals.items())


def waiter_ops(view: View, lines: dict[str, RankLine]) -> dict[str, list[Hit]]:
    """Where the waiters' tracebacks stop, per collective (a crashed rank's own traceback says
    where it died, not what it waited for)."""
    crashed = {r for r, rl in lines.items() if rl.end.kind in ("crashed", "killed")}
    ops = {op: [h for h in hs if view.rank(h) not in crashed] for op, hs in view.col.ops.items()}
    return {op: hs for op, hs in ops.items() if hs}


def waits_apart(lines: dict[str, RankLine], world: int) -> dict[str, str] | None:
    """rank -> the line of the job's own code where it waited, when every rank of the job timed out
    waiting and not all at the same line (an all_reduce in the backward on one, a send's wait() in
    a helper on another): nobody was late or dead, they waited in calls that never pair (GUIDE
    4.1). None when a rank crashed, lost its peer or has no lines here (then it may be the late
    one), when a waiter's traceback shows none of the job's own frames, or all stop at one line."""
    world = world or len(lines)
    ranks = [str(r) for r in range(world)]
    if world < 2 or any(r not in lines or lines[r].end.kind != "timeout" for r in ranks):
        return None
    where = {r: lines[r].end.exc.frame if lines[r].end.exc is not None else "" for r in ranks}
    return where if all(where.values()) and len(set(where.values())) > 1 else None


def _waits_apart(view: View, s: Scores, lines: dict[str, RankLine]) -> None:
    """DL409: waits_apart() as evidence for asymmetric-collective."""
    where = waits_apart(lines, view.col.world)
    if where is None:
        return
    ranks = sorted(where, key=int)
    s.add("asymmetric-collective", 4.5, tr(
        "every rank timed out waiting, at different places of the job's code: {places} (calls that never pair)",
        places="; ".join(tr("rank {ranks} at {where}", ranks=span([r for r in ranks if where[r] == w]), where=w)
                         for w in sorted(set(where.values())))),
        [lines[r].end.hit for r in ranks[:3] if lines[r].end.hit is not None], rule="DL409")


def path_rules(view: View, s: Scores, hang: bool | None, lines: dict[str, RankLine],
               who: dict | None = None) -> None:
    """hang: True when the symptom is a hang, False for another symptom, None when none was given.
    who: the culprit; a rank that died stops printing steps, so its being behind is no evidence
    that the ranks ran different numbers of steps (DL406 stays silent on it)."""
    col = view.col
    died = {r for r, rl in lines.items() if rl.end.kind in ("crashed", "killed")}
    if who and who.get("role") == "crashed":
        died |= {str(r) for r in who.get("ranks") or []}
    ops = waiter_ops(view, lines)
    if len(ops) > 1:
        hits = [hs[0] for hs in ops.values()]
        ranked = all(view.rank(h) is not None for hs in ops.values() for h in hs)
        s.add("asymmetric-collective", 4.5 if ranked else 2.5, tr(
            "tracebacks stop in different collectives: {ops} (ranks waiting in different collectives never meet)"
            if ranked else "tracebacks stop in different collectives: {ops}", ops=", ".join(sorted(ops))), hits,
            rule="DL405")
    else:
        _waits_apart(view, s, lines)
    unused = {view.rank(h) for h in col.hits.get("ddp-unfinished-reduction", ())}
    others = [r for r in lines if r not in unused]
    if unused and None not in unused and others:
        # GUIDE 4.1, a per-rank comparison: DDP's check of unused parameters runs on each rank alone;
        # failing on some ranks and not on others, their forward took another path than the others'
        raised = sorted((r for r in unused if r is not None), key=rank_key)
        s.add("asymmetric-collective", 4.0, tr("rank {ranks} had parameters unused in its backward while rank {others} "
              "did not: its forward took another path, so its gradient all-reduces differ", ranks=span(raised),
              others=span(sorted(others, key=rank_key))), col.hits["ddp-unfinished-reduction"][:2], rule="DL408")
    for kind in ("step", "iteration", "batch"):
        last = {r: p[kind] for r, p in col.progress.items() if kind in p}
        if len(last) > 1:
            lo = min(last.items(), key=lambda kv: kv[1][0])
            hi = max(last.items(), key=lambda kv: kv[1][0])
            waited = view.timeouts or view.unranked or view.hits_with("wait")
            if kind == "step" and _gap_is_resume(col, lo, hi):
                s.add("checkpoint-state-divergence", 5.0, tr(
                    "rank {hi} resumed at step {at} and ends at step {hi_n}, rank {lo} ends at step {lo_n}: the same "
                    "steps from different starting points (rank {lo} did not restore that checkpoint)", hi=hi[0],
                    at=col.resume[hi[0]][0][1], hi_n=hi[1][0], lo=lo[0], lo_n=lo[1][0]),
                    [col.resume[hi[0]][1], hi[1][1], lo[1][1]], rule="DL604")
                break  # the steps apart are explained: no DL406
            if hi[1][0] > lo[1][0] and (waited or hang) and lo[0] not in died:
                s.add("asymmetric-collective", 2.5, tr("the log ends with rank {lo} at {kind} {lo_n} and rank {hi} "
                      "at {kind} {hi_n}: ranks ran different numbers of steps", lo=lo[0], kind=kind,
                      lo_n=lo[1][0], hi=hi[0], hi_n=hi[1][0]),
                      [hi[1][1], lo[1][1]], "facts", rule="DL406")
                break
    sizes = {r: v for r, v in col.epoch_sizes.items()}
    if len({n for n, _h in sizes.values()}) > 1:
        # GUIDE 4.1: ranks with different numbers of batches run different numbers of steps;
        # without Join the one with more waits in a collective the others never call
        waited = bool(view.timeouts or view.unranked or view.hits_with("wait") or col.exceptions)
        lo = min(sizes.items(), key=lambda kv: kv[1][0])
        hi = max(sizes.items(), key=lambda kv: kv[1][0])
        s.add("asymmetric-collective", 4.0, tr("rank {hi} has {hi_n} batches per epoch, rank {lo} {lo_n}: uneven "
              "inputs make ranks run different numbers of steps", hi=hi[0], hi_n=hi[1][0], lo=lo[0], lo_n=lo[1][0]),
              [hi[1][1], lo[1][1]], "evidence" if waited else "facts", rule="DL407")
    shared = {ids: per for ids, per in col.sample_ids.items() if len(per) > 1}
    if shared:
        ids, per = next(iter(shared.items()))
        ranks = sorted(per, key=rank_key)
        s.add("data-sharding-seed", 5.0, tr("rank {ranks} printed the same sample ids [{ids}]: every rank reads "
              "the same data (no DistributedSampler, or the same seed for the shuffle)", ranks=span(ranks),
              ids=ids[:60]),
              [per[r] for r in ranks[:3]], rule="DL601")
    same = [k for k, per in col.losses.items() if len(per) > 1 and len(set(per.values())) == 1
            and len(next(iter(per.values())).split(".")[-1]) >= 4]
    if len(same) >= 3 and hang is not None and not shared:
        # weak: some frameworks print the all-reduced loss on every rank
        s.add("data-sharding-seed", 1.5, tr("ranks report identical losses at {n} steps: if these are per-rank "
              "losses, every rank sees the same data", n=len(same)), [], "facts", rule="DL602")
    points = {r: v[0] for r, v in col.resume.items()}
    if _disagree(list(points.values())):
        odd = odd_resume(col)
        said = ", ".join(tr("rank {rank}: {n}", rank=r, n=x.resume_text(p))
                         for r, p in sorted(points.items(), key=lambda kv: rank_key(kv[0])))
        s.add("checkpoint-state-divergence", 5.0,
              tr("ranks resumed from different points: {steps}; rank {odd} is the odd one", steps=said, odd=span(odd))
              if odd else tr("ranks resumed from different steps: {steps}", steps=said),
              [col.resume[r][1] for r in odd[:2]] + [v[1] for v in col.resume.values()][:3], rule="DL603")


def _gap_is_resume(col: Collector, lo: tuple, hi: tuple) -> bool:
    """Whether the ranks' last steps differ by exactly the step the one ahead said it resumed at,
    while the one behind announced no resume at that step: both ran the same steps, from different
    starting points (GUIDE 4.4). lo, hi: (rank, (step, hit))."""
    said = col.resume.get(hi[0])
    at = said[0][1] if said else None
    other = col.resume.get(lo[0])
    return bool(at) and hi[1][0] - lo[1][0] == at and (other is None or other[0][1] != at)


def _disagree(points: list[tuple[int | None, int | None]]) -> bool:
    """Whether two ranks' resume points differ in a field both name (epoch or step)."""
    return any(a[i] is not None and b[i] is not None and a[i] != b[i]
               for n, a in enumerate(points) for b in points[n + 1:] for i in (0, 1))


def odd_resume(col: Collector) -> list[str]:
    """The ranks whose resume point differs from the one most ranks announced ([] with no single
    most common point: two ranks that disagree cannot say which one is odd)."""
    counts: dict[tuple[int | None, int | None], list[str]] = defaultdict(list)
    for r, (p, _hit) in col.resume.items():
        counts[p].append(r)
    if len(counts) < 2:
        return []
    sizes = sorted((len(rs) for rs in counts.values()), reverse=True)
    if sizes[0] == sizes[1]:
        return []
    top = max(counts, key=lambda p: len(counts[p]))
    return sorted((r for p, rs in counts.items() if p != top for r in rs), key=rank_key)


def launch_rules(view: View, s: Scores) -> None:
    col = view.col
    launcher = view.hits_with("launcher")
    spawn = view.hits_with("spawn")
    if launcher and spawn:
        # both halves of the mechanism in the job's own lines: evidence, not a lead
        # (4.0: the weight the spawn line's own signature added before it counted only here)
        s.add("mixed-launchers", 4.0, tr("a launcher started the job and the script spawns its own "
              "processes too"), launcher[:1] + spawn[:1], rule="DL701")
    over = barrier_count(view)
    if over and over[1] > over[2]:
        # torch's store-based barrier counts every process that adds to its key: more than the world
        # size means processes outside this world joined its store under the same group, two rank
        # numberings in one rendezvous (GUIDE 3.2); with the script's own spawn, the launcher's
        # copies each started a world of their own.
        hit, n, m = over
        if spawn:
            s.add("mixed-launchers", 4.5, tr("{n} processes joined the store-based barrier of a world of {m}, and the "
                  "script spawns its own: each launched copy spawned a world of its own", n=str(n), m=str(m)),
                  [hit] + spawn[:1], rule="DL705")
        else:
            s.add("rank-env-mismatch", 4.5, tr("{n} processes joined the store-based barrier of a world of {m}: more "
                  "processes started than the world size says", n=str(n), m=str(m)), [hit], rule="DL705")
        s.against["collective-timeout"].append(tr("the barrier counted more processes than the world size: "
                                                  "none was missing from it"))
    taken, server = view.hits_with("port-taken"), view.hits_with("store-server")
    if taken and server:
        # GUIDE 3.2: the store's port taken while this job's own store server (in these logs) waited
        # for clients that never came: the holder is the job itself, so a second process started
        # as rank 0 (both host the store). Never on a taken port alone (another job holds it) nor
        # on a short store alone (workers that cannot reach the master).
        s.add("rank-env-mismatch", 4.0, tr("the port was taken while this job's own store waited for its "
              "clients: two processes of the job started as rank 0"), taken[:1] + server[:1], rule="DL702")
        s.against["master-addr-port"].append(tr("the port's holder is this job's own store server, not "
                                                "another job"))
    dups = {r: hs for r, hs in col.announce.items() if _started_twice(col, hs)}
    if dups:
        r, hs = next(iter(sorted(dups.items(), key=lambda kv: rank_key(kv[0]))))
        s.add("rank-env-mismatch", 2.0, tr("rank {ranks} started more than once",
                                           ranks=span(sorted(dups, key=rank_key))), hs[:2], rule="DL703")
        if launcher or spawn:
            s.add("mixed-launchers", 2.0, tr("duplicate ranks under a launcher"), hs[:2], rule="DL704")


def _started_twice(col: Collector, hits: list[Hit]) -> bool:
    """A rank announced twice within one run: in two files, or twice in one file with no end of
    training between the two (a run that finished, then started again in the same console, is
    two runs, each announcing its ranks once)."""
    places = {(h.file, h.proc, h.line) for h in hits}
    if len(places) < 2:
        return False
    if len({h.file for h in hits}) > 1:
        return True
    ends = next((f.ends for f in col.files if f.name == hits[0].file), [])
    runs: dict[int, set[tuple[str | None, int]]] = {}
    for h in hits:
        runs.setdefault(sum(1 for e in ends if e < h.line), set()).add((h.proc, h.line))
    return any(len(v) > 1 for v in runs.values())


def hardware_rules(view: View, s: Scores, hang: bool | None) -> None:
    """GUIDE 2.4 and 5: several GPUs that talk over PCIe only (consumer, workstation and PCIe
    data-centre boards, no NVLink) and a hang: NCCL's peer-to-peer over PCIe is absent, disabled
    by the driver or broken by ACS/IOMMU there, and a hang is how that shows. A fact about the
    hardware, never evidence; silent for an error or no symptom, for one GPU, for NVLink boards,
    and when the logs show P2P was off (NCCL_P2P_DISABLE, or channels set up without P2P)."""
    if not hang:
        return
    rows = {(k, f): v for k, facts in view.facts.items() for f, v in facts.items() if f.startswith("topo:GPU")}
    if "nvlink" in rows.values():
        return  # a pasted topology matrix joins GPUs by NVLink
    pcie = {m: hs for m, hs in view.col.gpus.items() if x.PCIE_GPU.search(m)}
    if len(pcie) < len(view.col.gpus) or not pcie and len({f for _k, f in rows}) < 2:
        return  # a mix of models (an NVLink board's lines decide nothing here), or nothing says PCIe only
    n = max((len({h.line for h in hs}) for hs in pcie.values()), default=0)
    if max(n, view.col.world, len(view.col.rank_hosts), len({f for _k, f in rows})) < 2:
        return
    chans = {k for kinds in view.channels.values() for k in kinds}
    off = any(f.get("env:NCCL_P2P_DISABLE") == "1" for f in view.facts.values())
    if off or (chans and not any(k.startswith("P2P") for k in chans)):
        return
    if not pcie:  # the matrix alone: it never names the model (GUIDE 5)
        s.add("p2p-unsupported", 1.5, tr("the pasted topology matrix joins the GPUs over PCIe only (no NVLink): "
              "peer-to-peer there is absent, disabled by the driver or broken by ACS/IOMMU, and a hang is how it "
              "shows (nvidia-smi topo -p2p r tells which; confirm with NCCL_P2P_DISABLE=1)"),
              [view.fact_hits[k] for k in sorted(rows)[:2] if k in view.fact_hits], "facts", rule="DL801")
        return
    model = max(pcie, key=lambda m: len(pcie[m]))
    s.add("p2p-unsupported", 1.5, tr("{model} GPUs talk over PCIe only: peer-to-peer there is absent, "
          "disabled by the driver or broken by ACS/IOMMU, and a hang is how it shows (confirm with "
          "NCCL_P2P_DISABLE=1)", model=model), pcie[model][:2], "facts", rule="DL801")
