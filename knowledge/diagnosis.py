"""The one diagnosis: every kind of evidence about an incident in, one frozen `Diagnosis` out.

Every renderer (the `logs` command and every other command that concludes, the app's Logs and
Conclusion steps, the md/html/json reports, `run`/`watch`) calls `diagnose()` and only formats
what it returns: the culprit, how sure the tool is (`confidence`), the ranked causes with their
basis and the lines for and against each, the next action, what to collect when the evidence
cannot tell, and whether a restart will help (`recurrence`).

Confidence (measured: tests/bench/eval_diagnosis.py prints the table per level; the rules that decide it
and the order of the causes are in knowledge/confidence.py):
- `confirmed`: the mechanism is shown end to end: the top cause rests on this incident's own
  evidence and the culprit's own failure line (or the waiters' lines that name the stuck rank, or
  a switch that turns the failure into a pass) is part of that evidence, and no other cause has
  comparable evidence;
- `likely`: evidence for the cause, not the whole chain;
- `unknown`: the symptom alone, facts without a failure, or evidence that fits several causes
  alike. The answer is then "not enough evidence" and what to collect next; the causes are only
  "where to look first", never a fix to apply.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

from .confidence import advisory, against_culprit, applicable, explanation_first, how_sure, signatures_of
from .errors import InputError
from .frozen import Frozen, frozen
from .i18n import t as tr
from .verdict import Ranked, culprit as pick_culprit, rank_causes

CONFIDENCE = ("confirmed", "likely", "unknown")
# where the logs stop (knowledge/logs/score.stage), for any symptom: a place in the run, which
# weighs priors (symptom_priors) and is shown, never evidence for one cause
STAGES = ("init", "first-step", "mid-training", "save-eval")
RECURRENCE = ("will-recur", "may-pass", "exclude-node")
# a hardware fault this close to a rank's death is part of it (kernel log and rank log clocks
# are the same node's; a log line is written a little after the fault it reports)
HARDWARE_WINDOW_S = 120
# how each rank's own lines end (the timeline) in the one status word JSON and text share
STATUS: Mapping[str, str] = {"crashed": "crashed", "killed": "killed", "lost-peer": "lost-peer",
                             "timeout": "timed-out", "exited": "exited", "finished": "finished",
                             "stopped": "stopped", "unknown": "no-end-seen"}
# the log tables' words for ranks the timeline does not know, in the same vocabulary
TABLE_STATUS: Mapping[str, str] = {"seen": "no-end-seen", "timeout": "timed-out", "exited": "exited",
                                   "crashed": "crashed", "missing": "missing", "not": "not-waiting"}


@frozen
class IncidentEvidence(Frozen):
    """Everything known about one incident, each source typed by what produced it.

    `logs`: a `distdoctor logs` result (LogReport.to_dict()); `findings`: check findings;
    `fleet`: `fleet compare`'s disagreements; `bisect`: cause id -> why a switch implicates it;
    `ruled_out`: cause id -> why a passing repro weakens it; `live`: items from stacks, Flight
    Recorder, RAS, lint, `run`/`watch` and hardware probes (`{"source", "ranks", "role", "why",
    "cause"}`); `collect`: what the caller (which can ask the probes) says to collect next, e.g.
    the exact `knobs` lines for the job's versions; `seen_before`: matching past incidents."""

    symptom: str | None = None
    logs: Mapping[str, Any] | None = None
    findings: Sequence[Mapping[str, Any]] = ()
    fleet: Sequence[Mapping[str, Any]] = ()
    bisect: Mapping[str, str] = field(default_factory=dict)
    ruled_out: Mapping[str, str] = field(default_factory=dict)
    live: Sequence[Mapping[str, Any]] = ()
    repro_causes: Sequence[Mapping[str, Any]] = ()
    collect: Sequence[str] = ()
    seen_before: Sequence[Mapping[str, Any]] = ()
    backend: str | None = None  # when known outside the logs (the session's check, the launch line)
    # hardware events on the node with their time: [{"cause", "what", "time" (ISO 8601), "host"}]
    # (the kernel log's Xids); one within HARDWARE_WINDOW_S of the culprit's death is evidence
    hardware: Sequence[Mapping[str, Any]] = ()
    # the topology pasted with the logs, as the caller parsed it (probes/topology's `topo --json`
    # dict: nvidia-smi topo -m / -p2p matrices, NCCL's graph and path lines); facts, never evidence
    topology: Mapping[str, Any] | None = None


@frozen
class Diagnosis(Frozen):
    """The verdict on one incident; `to_dict()` is what `--json`, sessions and reports carry."""

    confidence: str
    culprit: Mapping[str, Any] | None
    summary: str
    causes: tuple[Ranked, ...]
    next_action: Mapping[str, str]
    collect: tuple[str, ...]
    recurrence: str | None
    ranks: Mapping[str, Mapping[str, Any]]
    left_out: tuple[Mapping[str, str], ...] = ()
    hardening: tuple[str, ...] = ()
    seen_before: tuple[Mapping[str, Any], ...] = ()
    failed: bool = False  # the evidence shows a failure (even when its cause is unknown)
    stage: str | None = None  # where the logs stop (STAGES), None when they cannot tell

    @property
    def cause(self) -> str | None:
        """The top cause's id when the tool answers (confirmed or likely), else None."""
        return self.causes[0].id if self.causes and self.confident else None

    @property
    def confident(self) -> bool:
        return self.confidence in ("confirmed", "likely")

    @property
    def exit_code(self) -> int:
        """1 only for an answer (confirmed or likely); "not enough evidence" is 0."""
        return 1 if self.confident else 0

    def to_dict(self) -> dict[str, Any]:
        return {"confidence": self.confidence, "culprit": dict(self.culprit) if self.culprit else None,
                "summary": self.summary, "cause": self.cause, "failed": self.failed,
                "causes": [_cause_dict(r) for r in self.causes],
                "next_action": dict(self.next_action), "collect": list(self.collect),
                "recurrence": self.recurrence, "ranks": {r: dict(v) for r, v in self.ranks.items()},
                "left_out": [dict(x) for x in self.left_out], "hardening": list(self.hardening),
                "seen_before": [dict(x) for x in self.seen_before], "stage": self.stage}

    @classmethod
    def from_dict(cls, d: Any) -> Diagnosis:
        """The Diagnosis whose to_dict() `d` is (a `--json` verdict, a session's, a report's): every
        field read back, `cause` recomputed from the causes. A key an older version did not write
        takes the field's default, or its empty value when it has none (`confidence` "" says none was
        stated: the log analysis's own verdict states none); unknown keys are ignored; a field of
        the wrong kind is a DiagnosisError, never a half-read diagnosis."""
        if not isinstance(d, Mapping):
            raise DiagnosisError(tr("a saved diagnosis is a {kind}, not a mapping", kind=type(d).__name__))
        culprit = _get(d, "culprit", (Mapping, type(None)), None)
        ranks = _get(d, "ranks", Mapping, {})
        return cls(confidence=_get(d, "confidence", str, ""), culprit=dict(culprit) if culprit else None,
                   summary=_get(d, "summary", str, ""),
                   causes=tuple(ranked_from_dict(c) for c in _items(d, "causes", Mapping)),
                   next_action=dict(_get(d, "next_action", Mapping, {})),
                   collect=_items(d, "collect", str), recurrence=_get(d, "recurrence", (str, type(None)), None),
                   ranks={str(r): dict(_kind(v, Mapping, f"ranks.{r}")) for r, v in ranks.items()},
                   left_out=tuple(dict(x) for x in _items(d, "left_out", Mapping)),
                   hardening=_items(d, "hardening", str),
                   seen_before=tuple(dict(x) for x in _items(d, "seen_before", Mapping)),
                   failed=_get(d, "failed", bool, False), stage=_get(d, "stage", (str, type(None)), None))


class DiagnosisError(InputError):
    """A saved diagnosis (a session's, a `--json` result's) with a field of the wrong kind."""


def ranked_from_dict(d: Any) -> Ranked:
    """The Ranked whose to_dict() `d` is, read as Diagnosis.from_dict reads a diagnosis (a cause
    needs its id; a missing score is 0). Here rather than on Ranked: knowledge/verdict.py has no
    reader of saved results."""
    if not isinstance(d, Mapping):
        raise DiagnosisError(tr("a saved cause is a {kind}, not a mapping", kind=type(d).__name__))
    if not isinstance(d.get("id"), str):
        raise DiagnosisError(tr("a saved cause has no id"))
    score = _get(d, "score", (int, float), 0.0)
    if isinstance(score, bool):
        raise DiagnosisError(tr("a saved cause's score is a bool, not a number"))
    return Ranked(id=d["id"], score=score, reasons=_items(d, "reasons", str), basis=_get(d, "basis", str, "evidence"),
                  strong=_get(d, "strong", bool, False), against=_items(d, "against", str))


def _kind(value: Any, kinds: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(value, kinds):
        raise DiagnosisError(tr("a saved diagnosis's {where} is a {kind}", where=where, kind=type(value).__name__))
    return value


def _get(d: Mapping[str, Any], key: str, kinds: type | tuple[type, ...], empty: Any) -> Any:
    """d[key] if it is of one of `kinds`, `empty` when missing."""
    return _kind(d[key], kinds, key) if key in d else empty


def _items(d: Mapping[str, Any], key: str, kind: type) -> tuple[Any, ...]:
    """d[key] as a tuple when it is a list of `kind` (a tuple when never written to disk)."""
    return tuple(_kind(x, kind, f"{key} item") for x in _get(d, key, (list, tuple), ()))


def _cause_dict(r: Ranked) -> dict[str, Any]:
    return dict(r.to_dict(), against=list(r.against))


# an error where the logs stop at init (no rank through init_process_group) weighs the set-up causes
# (causes.toml `setup`) at least this share of the symptom's strongest prior: nothing of the job ran
INIT_SETUP = 0.75


def symptom_priors(kb: Any, symptom: str | None, stage: str | None = None) -> dict[str, float]:
    """Cause id -> prior weight in 0..1 for a symptom: its own causes at full weight, its parent's
    at half, the grandparent's at a quarter (the strongest wins), scaled by the largest. The one
    formula for priors: the log analysis's shift and the session's suspects both use it. `stage`
    is where the logs stop (knowledge/logs/score.stage): an error at init weighs the set-up causes
    (INIT_SETUP), since nothing past the set-up ran. A prior, never evidence for one cause."""
    weights: dict[str, float] = {}
    seen: set[str] = set()
    share = 1.0
    kind = getattr(kb.symptoms.get(symptom), "kind", None) if symptom else None
    while symptom and symptom in kb.symptoms and symptom not in seen:
        seen.add(symptom)
        sym = kb.symptoms[symptom]
        for cid, w in sym.causes.items():
            weights[cid] = max(weights.get(cid, 0.0), share * float(w))
        symptom = sym.parent
        share *= 0.5
    top = max(weights.values(), default=0.0)
    if stage == "init" and kind == "error" and top > 0:
        for cid, cause in kb.causes.items():
            if getattr(cause, "setup", False):
                weights[cid] = max(weights.get(cid, 0.0), INIT_SETUP * top)
    return {cid: w / top for cid, w in weights.items() if w > 0} if top > 0 else {}


def diagnose(kb: Any, ev: IncidentEvidence) -> Diagnosis:
    """The one verdict for this evidence (see the module's docstring for what each field means)."""
    logs = _clean(ev.logs)
    log_causes = list(logs["causes"]) if logs else []
    hardening = tuple(str(f.get("title", f.get("check", ""))) for f in ev.findings
                      if isinstance(f, Mapping) and advisory(kb, f))
    findings = [f for f in ev.findings if isinstance(f, Mapping) and not advisory(kb, f)]
    # the log analysis weighed the symptom among its own causes already; when other sources join,
    # every cause takes the symptom's prior alike, so the log causes do not lose theirs
    alone = not (findings or ev.fleet or ev.bisect or ev.live or ev.repro_causes or ev.hardware)
    explained = {str(c.get("id")) for c in log_causes if c.get("basis", "evidence") != "prior"} if alone else set()
    symptom = (logs or {}).get("symptom") or ev.symptom  # made precise by the logs where they can
    at = (logs or {}).get("stage") if (logs or {}).get("stage") in STAGES else None  # where the logs stop
    named = getattr(kb.symptoms.get(symptom), "title", None) if symptom else None
    suspects = [{"id": cid, "weight": w, "why": named or tr("the symptom {symptom} points here first", symptom=symptom)}
                for cid, w in symptom_priors(kb, symptom, at).items() if cid not in explained and cid != "other"]
    place = {cid: n for n, cid in enumerate(kb.causes)}  # equal priors in the guide's order
    suspects.sort(key=lambda x: place.get(x["id"], len(place)))
    who = pick_culprit(logs, ev.live)
    timeline = (logs or {}).get("timeline") or {}
    at_death = _hardware_at_death(ev.hardware, who, timeline)
    kind = getattr(kb.symptoms.get(symptom), "kind", None) if symptom else None
    pasted = ev.topology or (logs or {}).get("topology")  # the caller's, or kept with the logs' result
    live = [*ev.live, *at_death, *_topology_facts(pasted, kind == "hang" or str(ev.symptom).startswith("hang"))]
    if at_death and who is not None and not who.get("host"):  # exclude-node names the node
        who = dict(who, host=next((e.get("host") for e in ev.hardware if isinstance(e, Mapping) and e.get("host")),
                                   None))
    who = _with_host(who, timeline, ev.live)
    ranked = rank_causes(suspects, list(log_causes) + list(ev.repro_causes), findings, dict(ev.bisect),
                         ev.fleet, dict(ev.ruled_out), live)
    ranked = [r for r in ranked if r.id in kb.causes or r.basis == "evidence"]
    ranks = _ranks(timeline, who)
    backend = ev.backend or (((logs or {}).get("facts") or {}).get("job") or {}).get("backend")
    ranked, left_out = applicable(kb, ranked, backend, logs)
    ranked, contradicted = against_culprit(kb, ranked, who, left_out)
    ranked = explanation_first(kb, ranked, who, logs)
    failed = bool((logs or {}).get("verdict", {}).get("failed")) if logs else False
    failed = failed or any(r.strong and r.basis == "evidence" for r in ranked)
    confidence = how_sure(kb, [r for r in ranked if r.id not in contradicted], who, logs, ev.bisect)
    if not failed and confidence != "unknown":
        confidence = "unknown"
    summary = str(((logs or {}).get("verdict") or {}).get("summary") or (who or {}).get("why") or "")
    collect = _collect(ev, confidence, ranks, timeline)
    top = ranked[0] if ranked else None
    return Diagnosis(confidence=confidence, culprit=dict(who) if who else None, summary=summary,
                     causes=tuple(ranked), next_action=_next(kb, top, confidence, backend, collect, failed,
                                                            signatures_of(top, logs)),
                     collect=collect, recurrence=_recurrence(kb, top, who, timeline) if confidence != "unknown" else None,
                     ranks=ranks, left_out=tuple(left_out), hardening=hardening,
                     seen_before=tuple(x for x in ev.seen_before if isinstance(x, Mapping)), failed=failed,
                     stage=at)


def _clean(logs: Any) -> dict[str, Any] | None:
    """A log result with the shapes the rules read, whatever a session record holds (events can
    be written by older versions or by hand): a mapping of rank rows, a list of cause mappings."""
    if not isinstance(logs, Mapping):
        return None
    out = dict(logs)
    rows = logs.get("timeline")
    out["timeline"] = {str(r): _shaped(v, {"end": Mapping, "files": list, "hosts": list})
                       for r, v in rows.items() if isinstance(v, Mapping)} if isinstance(rows, Mapping) else {}
    causes = logs.get("causes")
    out["causes"] = [dict(_shaped(c, {"evidence": list, "reasons": list, "against": list}),
                          basis=c.get("basis") if c.get("basis") in ("evidence", "facts", "prior") else "evidence")
                     for c in causes if isinstance(c, Mapping) and isinstance(c.get("id"), str)] \
        if isinstance(causes, (list, tuple)) else []
    for key in ("verdict", "first_failure", "facts"):
        if not isinstance(out.get(key), Mapping):
            out[key] = {}
    if not isinstance(out.get("symptom"), str):
        out["symptom"] = None
    who = out["verdict"].get("culprit")
    if who is not None and not (isinstance(who, Mapping) and isinstance(who.get("ranks"), (list, tuple))):
        out["verdict"] = dict(out["verdict"], culprit=None)
    return out


def _shaped(row: Mapping[str, Any], kinds: Mapping[str, type]) -> dict[str, Any]:
    """`row` with each named field of the wanted kind (an empty one when it is not)."""
    out = dict(row)
    for key, kind in kinds.items():
        if not isinstance(out.get(key), kind):
            out[key] = {} if kind is Mapping else []
    return out


def _hardware_at_death(events: Sequence[Mapping[str, Any]], who: Mapping[str, Any] | None,
                       timeline: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A hardware fault on the node (an Xid, with its time) within HARDWARE_WINDOW_S of the
    moment the culprit died is evidence that it died of it: a live item naming the rank. Silent
    for a fault at another time (an old Xid says nothing about this death), for events with no
    time, and when no rank is seen dying with a timestamped line."""
    if not events or not who or who.get("role") != "crashed":
        return []
    rank = str((who.get("ranks") or [""])[0])
    row = timeline.get(rank) or {}
    # its failure line's own time, else its last timestamped line (a traceback has no time)
    ts = (row.get("end") or {}).get("ts") or row.get("last_ts")
    if not isinstance(ts, (list, tuple)) or len(ts) != 2 or not all(isinstance(x, (int, float)) for x in ts):
        return []
    out = []
    for e in (x for x in events if isinstance(x, Mapping)):
        at = _seconds(str(e.get("time") or ""), int(ts[0]))
        if e.get("cause") and at is not None and abs(at - float(ts[1])) <= HARDWARE_WINDOW_S:
            out.append({"source": "hardware", "cause": str(e["cause"]), "ranks": [rank], "role": "crashed",
                        "why": tr("{what} on {host} at {time}, {gap} s from rank {rank}'s last line",
                                  what=e.get("what") or e["cause"], host=e.get("host") or "?",
                                  time=e.get("time"), gap=round(abs(at - float(ts[1]))), rank=rank)})
    return out


# links between two GPUs through a host bridge or the CPUs (nvidia-smi topo -m): P2P over them is
# often unsupported, disabled by the driver or broken by ACS/IOMMU (GUIDE 2.4)
HOST_LINKS = ("SYS", "PHB", "NODE")


def _topology_facts(topology: Any, hang: bool) -> list[dict[str, Any]]:
    """Context pasted with the log weighs the set-up causes: a topology showing no P2P between
    GPUs (the driver's NS/CNS, NCCL's "P2P is disabled"), or GPUs linked only through the host
    (SYS, PHB, NODE; no NVLink), in a hang weighs p2p-unsupported (GUIDE 2.4, a hang is how broken
    P2P shows). A fact of the set-up, never this incident's evidence: it orders the causes, it
    never makes an answer confident. Silent for another symptom, with NVLink or P2P shown working
    between every pair, and with no topology."""
    if not hang or not isinstance(topology, Mapping):
        return []
    pairs = [p for p in topology.get("pairs") or [] if isinstance(p, Mapping)]
    bad = [str(x) for x in topology.get("pairs_without_p2p") or [] if isinstance(x, str)]
    if bad:
        why = tr("the pasted topology shows no P2P between {pairs}", pairs=", ".join(bad[:4]))
    else:
        host = [f"{p.get('a')}-{p.get('b')} {p.get('link')}" for p in pairs
                if str(p.get("link")) in HOST_LINKS and p.get("p2p") not in ("OK", "used")]
        if not host or topology.get("nvlink") or topology.get("p2p") == "all":
            return []
        why = tr("the pasted topology links GPUs only through the host ({pairs}), with no NVLink: P2P there is "
                 "often unsupported or broken by ACS/IOMMU (confirm with NCCL_P2P_DISABLE=1)",
                 pairs=", ".join(host[:4]))
    return [{"source": "topology", "cause": "p2p-unsupported", "ranks": [], "role": "", "why": why}]


def _seconds(iso: str, kind: int) -> float | None:
    """An ISO 8601 time on the log timestamps' scale (extract.timestamp): kind 2 seconds of a full
    date, kind 1 glog's year-less one. Wall-clock time is compared as written (logs and kernel
    log are written in the node's own time zone)."""
    import calendar
    from datetime import datetime

    try:
        t = datetime.fromisoformat(iso)
    except ValueError:
        return None
    if kind == 2:
        return float(calendar.timegm(t.timetuple()))
    return float(((t.month * 31 + t.day) * 24 + t.hour) * 3600 + t.minute * 60 + t.second)


def _with_host(who: dict[str, Any] | None, timeline: Mapping[str, Any],
               live: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The culprit with its node, when what was given places its ranks on exactly one host (the
    NCCL host:pid keys of its lines, or a live capture's node); silent when they name several."""
    if who is None or who.get("host"):
        return who
    ranks = {str(r) for r in who.get("ranks") or []}
    on = {str(h) for r in ranks for h in ((timeline.get(r) or {}).get("hosts") or [])
          if isinstance(timeline.get(r), Mapping)}
    on |= {str(x["host"]) for x in live if isinstance(x, Mapping) and x.get("host")
           and ranks & {str(r) for r in x.get("ranks") or []}}
    return dict(who, host=on.pop()) if len(on) == 1 else who


def _ranks(timeline: Mapping[str, Any], who: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Each rank's one status (the word the text shows), its last step and collective, its files."""
    blamed = {str(r) for r in (who or {}).get("ranks") or []}
    out: dict[str, dict[str, Any]] = {}
    for rank, row in timeline.items():
        if not isinstance(row, Mapping):
            continue
        end = row.get("end") or {}
        status = STATUS.get(str(end.get("kind", "unknown")), str(end.get("kind", "")))
        if rank in blamed and (who or {}).get("role") in ("stuck", "slow") and status not in ("crashed", "killed"):
            status = str(who["role"])  # the waiters name it: it never arrived (or came late)
        out[str(rank)] = {"status": status, "step": row.get("step"), "last_collective": row.get("last_collective"),
                          "exitcode": row.get("exitcode"), "files": list(row.get("files") or [])[:4],
                          "hosts": list(row.get("hosts") or [])}
    return out


def _collect(ev: IncidentEvidence, confidence: str, ranks: Mapping[str, Any],
             timeline: Mapping[str, Any]) -> tuple[str, ...]:
    """What to collect next: the caller's exact lines (knobs for these versions), then the live
    evidence a hang still offers, then the ranks whose logs are missing from what was given."""
    out = list(ev.collect) if confidence == "unknown" else []
    if confidence == "unknown":  # what the logs themselves say is missing (the keys a store wait gave up on)
        said = ev.logs.get("collect") if isinstance(ev.logs, Mapping) else None
        out += [c for c in said if isinstance(c, str)] if isinstance(said, (list, tuple)) else []
    hang = (ev.symptom or "").startswith("hang") or any(r.get("status") in ("stuck", "timed-out")
                                                         for r in ranks.values())
    if hang:  # the one thing to do while it still hangs, whatever the logs concluded
        out.append("distdoctor stacks --job auto   # " + tr("while the job still hangs: where every rank is"))
        out.append("distdoctor watch --job auto   # " + tr("or watch it: the evidence is taken when the hang is confirmed"))
    if confidence == "unknown":
        out.append("distdoctor run -- torchrun ...   # " + tr("catch the next occurrence with its evidence"))
    missing = _missing_ranks(ranks)
    if missing:
        out.append(tr("the logs of rank {ranks} (not in what was given)", ranks=", ".join(missing)))
    return tuple(dict.fromkeys(out))


def _missing_ranks(ranks: Mapping[str, Any]) -> list[str]:
    nums = sorted(int(r) for r in ranks if str(r).isdigit())
    if not nums or nums[-1] == 0:
        return []
    return [str(n) for n in range(0, nums[-1]) if n not in nums][:16]


def _next(kb: Any, top: Ranked | None, confidence: str, backend: str | None, collect: tuple[str, ...],
          failed: bool, signatures: tuple[str, ...] = ()) -> dict[str, str]:
    """The next action: the top cause's fix when the tool answers; what to collect when not."""
    if top is not None and confidence != "unknown":
        cause = kb.causes.get(top.id)
        if cause is None:  # outside the guide's causes (a kill from outside): what its line means
            said = next((kb.signatures[sid].description for sid in signatures
                         if sid in kb.signatures and kb.signatures[sid].description), "")
            return {"kind": "fix", "text": said or tr("Not a guide cause ({cause_id}): see the evidence.",
                                                       cause_id=top.id), "command": ""}
        fix = fix_for_backend(cause.fixes, backend) if cause.fixes else None
        return {"kind": "fix", "text": cause.fix.strip(), "command": fix.text if fix else ""}
    text = tr("Not enough evidence to name a cause: collect this next.") if failed else \
        tr("No failure in this evidence: nothing to fix; collect this if the job still misbehaves.")
    return {"kind": "collect", "text": text, "command": collect[0] if collect else ""}


def fix_for_backend(fixes: Sequence[Any], backend: str | None) -> Any:
    """The first fix that fits the job's backend: a Gloo job gets GLOO_* lines, not NCCL_* ones."""
    if backend == "gloo":
        for fix in fixes:
            if "GLOO_" in str(fix.text):
                return fix
        for fix in fixes:
            if "NCCL_" not in str(fix.text):
                return fix
    return fixes[0]


OWN_FAULT_SIGNALS = (-6, -7, -11)  # SIGABRT, SIGBUS, SIGSEGV as launchers report them


def _recurrence(kb: Any, top: Ranked | None, who: Mapping[str, Any] | None,
                timeline: Mapping[str, Any]) -> str | None:
    """Should they restart? The cause's own kind (causes.toml `recurrence`), except that a crash
    whose culprit was killed from outside (a kill signal, no error of its own) may pass."""
    if top is None or top.id not in kb.causes:
        return None
    value = getattr(kb.causes[top.id], "recurrence", "") or None
    if top.id == "rank-crash-deadlock" and who and who.get("role") == "crashed":
        row = timeline.get(str((who.get("ranks") or [""])[0])) or {}
        # a kill from outside (SIGKILL, an interrupt); SIGABRT, SIGBUS and SIGSEGV are the process's own
        if (row.get("end") or {}).get("kind") == "killed" and row.get("exitcode") not in OWN_FAULT_SIGNALS:
            return "may-pass"
    return value


def log_result(report: Mapping[str, Any], d: Diagnosis, symptom: str | None = None) -> dict[str, Any]:
    """A log analysis (LogReport.to_dict()) as `distdoctor logs --json` prints it: the verdict is
    the diagnosis, the causes come in its order with their log lines, each rank's status is the
    diagnosis's one word (the one the text shows), and the symptom it was read with is kept (a
    session replays the diagnosis from it)."""
    out = dict(report)
    out["symptom"] = report.get("symptom") or symptom
    lines = {str(c.get("id")): c for c in report.get("causes") or [] if isinstance(c, Mapping)}
    out["verdict"] = d.to_dict()
    out["causes"] = [dict(lines.get(r.id) or {"id": r.id, "evidence": []}, id=r.id, basis=r.basis,
                          strong=r.strong, reasons=[x for x in (lines.get(r.id) or {}).get("reasons") or r.reasons],
                          against=list(r.against)) for r in d.causes]
    ranks = {str(k): dict(v) for k, v in (report.get("ranks") or {}).items() if isinstance(v, Mapping)}
    for row in ranks.values():  # ranks the timeline has no line for (named in a table only)
        word = str(row.get("status", ""))
        row["status"] = TABLE_STATUS.get(word.split(" ")[0], word)
    for rank, row in d.ranks.items():
        ranks.setdefault(rank, {})["status"] = row["status"]
    out["ranks"] = ranks
    return out
