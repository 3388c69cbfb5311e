"""The one diagnosis: every kind of evidence about an incident in, one frozen `Diagnosis` out.

Every renderer (the `logs` command and every other command that concludes, the app's Logs and
Conclusion steps, the md/html/json reports, `run`/`watch`) calls `diagnose()` and only formats
what it returns: the culprit, how sure the tool is (`confidence`), the ranked causes with their
basis and the lines for and against each, the next action, what to collect when the evidence
cannot tell, and whether a restart will help (`recurrence`).

Confidence (measured: tests/eval_diagnosis.py prints the table per level):
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

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .i18n import t as tr
from .verdict import Ranked, culprit as pick_culprit, rank_causes

CONFIDENCE = ("confirmed", "likely", "unknown")
RECURRENCE = ("will-recur", "may-pass", "exclude-node")
# a second cause with at least this share of the top cause's score "fits alike": nothing is sure
ALIKE = 0.75
# below this share the top cause stands alone (a confirmed answer needs no close rival)
ALONE = 0.5
# signatures.toml's weight for "strong" (4 is "decisive on its own")
STRONG = 3.0
# a hardware fault this close to a rank's death is part of it (kernel log and rank log clocks
# are the same node's; a log line is written a little after the fault it reports)
HARDWARE_WINDOW_S = 120
# what a cause's premise says about the culprit (causes.toml `premise`); the roles that contradict it
CONTRADICTS: Mapping[str, tuple[str, ...]] = {"crash": ("stuck", "slow"), "no-crash": ("crashed",)}
# how each rank's own lines end (the timeline) in the one status word JSON and text share
STATUS: Mapping[str, str] = {"crashed": "crashed", "killed": "killed", "lost-peer": "lost-peer",
                             "timeout": "timed-out", "exited": "exited", "finished": "finished",
                             "stopped": "stopped", "unknown": "no-end-seen"}
WAITED = ("lost-peer", "timeout")
# the log tables' words for ranks the timeline does not know, in the same vocabulary
TABLE_STATUS: Mapping[str, str] = {"seen": "no-end-seen", "timeout": "timed-out", "exited": "exited",
                                   "crashed": "crashed", "missing": "missing", "not": "not-waiting"}


@dataclass(frozen=True)
class IncidentEvidence:
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


@dataclass(frozen=True)
class Diagnosis:
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
                "seen_before": [dict(x) for x in self.seen_before]}


def _cause_dict(r: Ranked) -> dict[str, Any]:
    return dict(r.to_dict(), against=list(r.against))


def symptom_priors(kb: Any, symptom: str | None) -> dict[str, float]:
    """Cause id -> prior weight in 0..1 for a symptom: its own causes at full weight, its parent's
    at half, the grandparent's at a quarter (the strongest wins), scaled by the largest. The one
    formula for priors: the log analysis's shift and the session's suspects both use it."""
    weights: dict[str, float] = {}
    seen: set[str] = set()
    share = 1.0
    while symptom and symptom in kb.symptoms and symptom not in seen:
        seen.add(symptom)
        sym = kb.symptoms[symptom]
        for cid, w in sym.causes.items():
            weights[cid] = max(weights.get(cid, 0.0), share * float(w))
        symptom = sym.parent
        share *= 0.5
    top = max(weights.values(), default=0.0)
    return {cid: w / top for cid, w in weights.items() if w > 0} if top > 0 else {}


def diagnose(kb: Any, ev: IncidentEvidence) -> Diagnosis:
    """The one verdict for this evidence (see the module's docstring for what each field means)."""
    logs = ev.logs if isinstance(ev.logs, Mapping) else None
    log_causes = [c for c in (logs or {}).get("causes") or [] if isinstance(c, Mapping)]
    hardening = tuple(str(f.get("title", f.get("check", ""))) for f in ev.findings
                      if isinstance(f, Mapping) and _advisory(kb, f))
    findings = [f for f in ev.findings if isinstance(f, Mapping) and not _advisory(kb, f)]
    # the log analysis weighed the symptom among its own causes already; when other sources join,
    # every cause takes the symptom's prior alike, so the log causes do not lose theirs
    alone = not (findings or ev.fleet or ev.bisect or ev.live or ev.repro_causes or ev.hardware)
    explained = {str(c.get("id")) for c in log_causes if c.get("basis", "evidence") != "prior"} if alone else set()
    symptom = (logs or {}).get("symptom") or ev.symptom  # made precise by the logs where they can
    named = getattr(kb.symptoms.get(symptom), "title", None) if symptom else None
    suspects = [{"id": cid, "weight": w, "why": named or tr("the symptom {symptom} points here first", symptom=symptom)}
                for cid, w in symptom_priors(kb, symptom).items() if cid not in explained and cid != "other"]
    place = {cid: n for n, cid in enumerate(kb.causes)}  # equal priors in the guide's order
    suspects.sort(key=lambda x: place.get(x["id"], len(place)))
    who = pick_culprit(logs, ev.live)
    timeline = (logs or {}).get("timeline") or {}
    at_death = _hardware_at_death(ev.hardware, who, timeline)
    live = [*ev.live, *at_death]
    if at_death and who is not None and not who.get("host"):  # exclude-node names the node
        who = dict(who, host=next((e.get("host") for e in ev.hardware if e.get("host")), None))
    ranked = rank_causes(suspects, list(log_causes) + list(ev.repro_causes), findings, dict(ev.bisect),
                         ev.fleet, dict(ev.ruled_out), live)
    ranked = [r for r in ranked if r.id in kb.causes or r.basis == "evidence"]
    ranks = _ranks(timeline, who)
    backend = ev.backend or (((logs or {}).get("facts") or {}).get("job") or {}).get("backend")
    ranked, left_out = _applicable(kb, ranked, backend, logs)
    ranked, contradicted = _against_culprit(kb, ranked, who, left_out)
    ranked = _explanation_first(kb, ranked, who, logs)
    failed = bool((logs or {}).get("verdict", {}).get("failed")) if logs else False
    failed = failed or any(r.strong and r.basis == "evidence" for r in ranked)
    confidence = _confidence(kb, [r for r in ranked if r.id not in contradicted], who, logs, ev)
    if not failed and confidence != "unknown":
        confidence = "unknown"
    summary = str(((logs or {}).get("verdict") or {}).get("summary") or (who or {}).get("why") or "")
    collect = _collect(ev, confidence, ranks, timeline)
    top = ranked[0] if ranked else None
    return Diagnosis(confidence=confidence, culprit=dict(who) if who else None, summary=summary,
                     causes=tuple(ranked), next_action=_next(kb, top, confidence, backend, collect, failed,
                                                            _signatures_of(top, logs)),
                     collect=collect, recurrence=_recurrence(kb, top, who, timeline) if confidence != "unknown" else None,
                     ranks=ranks, left_out=tuple(left_out), hardening=hardening,
                     seen_before=tuple(x for x in ev.seen_before if isinstance(x, Mapping)), failed=failed)


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
    if not isinstance(ts, (list, tuple)) or len(ts) != 2:
        return []
    out = []
    for e in events:
        at = _seconds(str(e.get("time") or ""), int(ts[0]))
        if e.get("cause") and at is not None and abs(at - float(ts[1])) <= HARDWARE_WINDOW_S:
            out.append({"source": "hardware", "cause": str(e["cause"]), "ranks": [rank], "role": "crashed",
                        "why": tr("{what} on {host} at {time}, {gap} s from rank {rank}'s last line",
                                  what=e.get("what") or e["cause"], host=e.get("host") or "?",
                                  time=e.get("time"), gap=round(abs(at - float(ts[1]))), rank=rank)})
    return out


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


def _advisory(kb: Any, finding: Mapping[str, Any]) -> bool:
    """A hardening advice (checks.toml `advisory = true`) is never evidence for this incident."""
    check = kb.checks.get(str(finding.get("check", "")))
    return bool(check is not None and getattr(check, "advisory", False))


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


def _applicable(kb: Any, ranked: list[Ranked], backend: str | None,
                logs: Mapping[str, Any] | None) -> tuple[list[Ranked], list[dict[str, str]]]:
    """Causes that cannot apply to this job are left out with the reason: on a Gloo job that
    shows no GPU, the causes that need NCCL or a GPU (causes.toml `needs`). A cause with a
    failure line of its own in these logs stays: the line proves the premise wrong."""
    if backend != "gloo" or _gpu_seen(logs):
        return ranked, []
    kept, left = [], []
    for r in ranked:
        needs = set(getattr(kb.causes.get(r.id), "needs", ()) or ())
        if needs & {"gpu", "nccl"} and not (r.basis == "evidence" and r.strong):
            left.append({"id": r.id, "why": tr("a Gloo job with no GPU in its logs: this cause needs {needs}",
                                               needs=" + ".join(sorted(needs)))})
        else:
            kept.append(r)
    return kept, left


def _gpu_seen(logs: Mapping[str, Any] | None) -> bool:
    facts = (logs or {}).get("facts") or {}
    values = facts.get("values") or {}
    return any(k.startswith(("nccl", "cuda", "gpu")) for k in values) or any(
        str(k).startswith(("nccl", "cuda", "gpu")) for k in facts)


def _against_culprit(kb: Any, ranked: list[Ranked], who: Mapping[str, Any] | None,
                     left: list[dict[str, str]]) -> tuple[list[Ranked], set[str]]:
    """A cause whose premise the culprit contradicts is argued against in words and can no longer
    come first: "no crashed rank in sight" beside a crashed culprit, "a rank died" beside a rank
    the waiters name as never arriving. Returns the ranking and the ids argued against (no rival
    to the answer)."""
    role = (who or {}).get("role")
    if not role:
        return ranked, set()
    out, demoted = [], []
    for r in ranked:
        premise = getattr(kb.causes.get(r.id), "premise", "")
        if role in CONTRADICTS.get(premise, ()) and not (r.basis == "evidence" and r.strong and not out):
            ranks = ", ".join(str(x) for x in who.get("ranks") or [])
            why = tr("the culprit, rank {ranks}, {role}: this cause's premise does not hold", ranks=ranks,
                     role=tr(str(role)))
            if r.basis == "prior":  # nothing in its favour but the symptom: it does not apply
                left.append({"id": r.id, "why": why})
                continue
            demoted.append(Ranked(r.id, r.score, r.reasons, "facts" if r.basis == "evidence" else r.basis,
                                  False, (*r.against, why)))
        else:
            out.append(r)
    return out + demoted, {r.id for r in demoted}


def _explanation_first(kb: Any, ranked: list[Ranked], who: Mapping[str, Any] | None,
                       logs: Mapping[str, Any] | None) -> list[Ranked]:
    """A consequence never outranks its explanation. When the top cause is "a rank died and the
    others wait" and another cause with this incident's evidence explains why the rank died, that
    cause comes first (see `_explains`)."""
    if not ranked or getattr(kb.causes.get(ranked[0].id), "premise", "") != "crash":
        return ranked
    for n, r in enumerate(ranked[1:], 1):
        if _explains(kb, r, who, logs):
            return [r, *ranked[:n], *ranked[n + 1:]]
    return ranked


def _explains(kb: Any, r: Ranked, who: Mapping[str, Any] | None, logs: Mapping[str, Any] | None) -> bool:
    """Whether a cause explains the crash: it rests on this incident's evidence, can kill a rank
    (causes.toml `explains_crash`), and, when the culprit's own failure line is shown, cites that
    very line; when the crash is only inferred (a peer's lost connection, a launcher's exit code),
    it is a set-up cause (`setup`) with evidence of its own."""
    cause = kb.causes.get(r.id)
    if not (r.basis == "evidence" and r.strong and getattr(cause, "explains_crash", False)):
        return False
    if any(reason.startswith("hardware:") for reason in r.reasons):
        return True  # a fault on the culprit's node as it died
    ff = (logs or {}).get("first_failure") or {}
    blamed = [str(x) for x in (who or {}).get("ranks") or []]
    if (who or {}).get("role") == "crashed" and str(ff.get("rank")) in blamed:
        cites = next((c.get("evidence") or [] for c in (logs or {}).get("causes") or []
                      if isinstance(c, Mapping) and c.get("id") == r.id), [])
        return (ff.get("file"), ff.get("line")) in {(e.get("file"), e.get("line")) for e in cites}
    return bool(getattr(cause, "setup", False))


def _confidence(kb: Any, ranked: list[Ranked], who: Mapping[str, Any] | None, logs: Mapping[str, Any] | None,
                ev: IncidentEvidence) -> str:
    top = ranked[0] if ranked else None
    if top is None or top.basis != "evidence" or not top.strong:
        return "unknown"
    needs = set(getattr(kb.causes.get(top.id), "answer_needs", ()) or ())
    if "culprit" in needs and not (who or {}).get("ranks"):
        return "unknown"
    if "waiters" in needs and not _waiters(logs):
        return "unknown"
    # the deadlock a crash leaves behind is no rival of the cause that explains the crash
    compatible = _explains(kb, top, who, logs)
    rivals = [r.score for r in ranked[1:] if r.basis != "prior"
              and not (compatible and getattr(kb.causes.get(r.id), "premise", "") == "crash")]
    share = max(rivals, default=0.0) / top.score if top.score > 0 else 1.0
    if share >= ALIKE:
        return "unknown"
    chain = top.id in ev.bisect or _chain(top, who, logs)
    if chain and share < ALONE:
        return "confirmed"
    # with no rank named, the line itself must be strong: one weak or moderate signature fits
    # several causes (a reset connection, a catch-all NCCL code)
    if not (who or {}).get("ranks") and not _other_source(top) and _weight(top, logs) < STRONG:
        return "unknown"
    return "likely"


def _signatures_of(top: Ranked | None, logs: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The signature ids of the top cause's log lines, in their order."""
    cause = next((c for c in (logs or {}).get("causes") or [] if isinstance(c, Mapping)
                  and top is not None and c.get("id") == top.id), {})
    return tuple(dict.fromkeys(str(e.get("signature")) for e in cause.get("evidence") or []
                               if isinstance(e, Mapping) and e.get("signature")))


def _weight(top: Ranked, logs: Mapping[str, Any] | None) -> float:
    """The weight of the top cause's strongest failure signature in the logs (0: none)."""
    cause = next((c for c in (logs or {}).get("causes") or [] if isinstance(c, Mapping) and c.get("id") == top.id), {})
    try:
        return float(cause.get("weight") or 0.0)
    except (TypeError, ValueError):
        return 0.0


def _other_source(top: Ranked) -> bool:
    """Whether evidence beyond the logs backs the cause (a check, the fleet, a switch, a live capture)."""
    return any(not r.startswith(("logs", "symptom")) for r in top.reasons)


def _waiters(logs: Mapping[str, Any] | None) -> bool:
    """Whether any rank is seen waiting: its lines end in a timeout or a lost peer."""
    timeline = (logs or {}).get("timeline") or {}
    return any(((row or {}).get("end") or {}).get("kind") in WAITED for row in timeline.values())


def _chain(top: Ranked, who: Mapping[str, Any] | None, logs: Mapping[str, Any] | None) -> bool:
    """The mechanism end to end: the culprit's own failure line is evidence for the top cause and
    another rank's lines show what followed (it waited, lost its peer); or the waiters name a
    stuck rank whose lines simply stop."""
    if not who or not logs:
        return False
    timeline = logs.get("timeline") or {}
    blamed = [str(r) for r in who.get("ranks") or []]
    others = [row for r, row in timeline.items() if r not in blamed and isinstance(row, Mapping)]
    waited = any((row.get("end") or {}).get("kind") in WAITED for row in others)
    if not waited:
        return False
    if who.get("role") in ("stuck", "slow"):
        return True
    ff = logs.get("first_failure") or {}
    cause = next((c for c in logs.get("causes") or [] if c.get("id") == top.id), None)
    own = {(e.get("file"), e.get("line")) for e in (cause or {}).get("evidence") or []}
    return who.get("role") == "crashed" and str(ff.get("rank")) in blamed and (ff.get("file"), ff.get("line")) in own


def _collect(ev: IncidentEvidence, confidence: str, ranks: Mapping[str, Any],
             timeline: Mapping[str, Any]) -> tuple[str, ...]:
    """What to collect next: the caller's exact lines (knobs for these versions), then the live
    evidence a hang still offers, then the ranks whose logs are missing from what was given."""
    out = list(ev.collect) if confidence == "unknown" else []
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


def _recurrence(kb: Any, top: Ranked | None, who: Mapping[str, Any] | None,
                timeline: Mapping[str, Any]) -> str | None:
    """Should they restart? The cause's own kind (causes.toml `recurrence`), except that a crash
    whose culprit was killed from outside (a kill signal, no error of its own) may pass."""
    if top is None or top.id not in kb.causes:
        return None
    value = getattr(kb.causes[top.id], "recurrence", "") or None
    if top.id == "rank-crash-deadlock" and who and who.get("role") == "crashed":
        row = timeline.get(str((who.get("ranks") or [""])[0])) or {}
        if (row.get("end") or {}).get("kind") == "killed":
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
    for rank, row in ranks.items():  # ranks the timeline has no line for (named in a table only)
        word = str(row.get("status", ""))
        row["status"] = TABLE_STATUS.get(word.split(" ")[0], word)
    for rank, row in d.ranks.items():
        ranks.setdefault(rank, {})["status"] = row["status"]
    out["ranks"] = ranks
    return out
