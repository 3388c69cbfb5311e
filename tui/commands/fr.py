"""`distdoctor fr DIR`: read PyTorch Flight Recorder dumps and name the rank that broke step."""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from typing import Any

from distdoctor.knowledge import i18n
from distdoctor.knowledge.i18n import t
from distdoctor.knowledge.printable import clean, clean_block

from ..errors import UsageError
from . import common
from .exitcodes import problem_if

KIND = "fr"
DESCRIPTION = """\
Read PyTorch Flight Recorder dumps (one file per rank, pickle or JSON, the rank
at the end of the file name) and, for each process group, show the last
collective every rank completed, the first collective where the ranks disagree
(a rank missing, a different op, size or dtype at the same SeqNum), the ranks
that never joined, and the culprit. Pickles are read with an unpickler that
refuses every class and function: only plain data loads.

Dumps come from TORCH_NCCL_DUMP_ON_TIMEOUT=1 with TORCH_FR_BUFFER_SIZE set
(files TORCH_FR_DUMP_TEMP_FILE + rank), or from
torch._C._distributed_c10d._dump_fr_trace() / _dump_fr_trace_json(); see
`distdoctor knobs` for the switches your torch needs. Gloo dumps that torch's
own fr_trace cannot read (KeyError ('0', 0)) are read too."""
EPILOG = """\
examples:
  distdoctor fr /tmp/fr-dumps/                   every rank's dump in a folder
  distdoctor fr /tmp/nccl_trace_rank_            the TORCH_FR_DUMP_TEMP_FILE prefix itself
  distdoctor fr /tmp/fr-dumps/ --json            {"groups": [...], "culprit": {...}}
  distdoctor fr dumps/ --stacks stacks.json      cross-check with `distdoctor stacks --json`
  distdoctor fr dumps/ --logs logs.json          cross-check with `distdoctor logs --json`
  distdoctor fr dumps/ --session inc-42          add to a session (its stacks and logs are cross-checked)

exit codes: 0 the ranks agree, 1 a disagreement or a stall was found,
            2 no dumps, an unreadable or refused dump, or bad usage
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("fr", help=t("read Flight Recorder dumps: the first collective where ranks disagree"),
                            description=t(DESCRIPTION), epilog=t(EPILOG),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", metavar="DIR",
                        help=t("folder(s) of dumps, dump files, or the dump prefix "
                             "(TORCH_FR_DUMP_TEMP_FILE's value), one file per rank; or a running "
                             "job's debug server (http://HOST:25999, start_debug_server)"))
    parser.add_argument("--stacks", metavar="FILE",
                        help=t("output of `distdoctor stacks --json` to cross-check the culprit with"))
    parser.add_argument("--logs", metavar="FILE",
                        help=t("output of `distdoctor logs --json` to cross-check the culprit with"))
    common.add_common(parser)
    parser.set_defaults(func=run)


def _json_file(option: str, path: str, producer: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(t("{option} {path}: unreadable ({why})", option=option, path=path,
                           why=getattr(exc, "strerror", None) or exc)) from None
    if not isinstance(data, dict):
        raise UsageError(t("{option} {path}: not the output of `{producer}`", option=option, path=path,
                           producer=producer))
    return data


def _session_event(args: argparse.Namespace, kind: str) -> dict[str, Any] | None:
    """The session's latest result of that kind (stacks, logs), if --session names one."""
    if not getattr(args, "session", None):
        return None
    from ..record.session import SessionError, SessionStore, events_of

    try:
        record = SessionStore().load(args.session)
    except SessionError:
        return None  # a new session: nothing to cross-check yet
    found = [e.get("data") for e in events_of(record) if e.get("kind") == kind]
    return found[-1] if found and isinstance(found[-1], dict) else None


def _evidence_from(args: argparse.Namespace) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Stacks and logs to cross-check with: the files given, else the session's latest results."""
    stacks = (_json_file("--stacks", args.stacks, "distdoctor stacks --json") if args.stacks
              else _session_event(args, "stacks"))
    logs = (_json_file("--logs", args.logs, "distdoctor logs --json") if args.logs
            else _session_event(args, "logs"))
    return stacks, logs


def run(args: argparse.Namespace) -> int:
    from distdoctor.probes.flightrec import (
        as_evidence,
        cross_check,
        cross_check_logs,
        read_and_analyse,
        to_json,
    )

    stacks, logs = _evidence_from(args)
    result = read_and_analyse(_live(args.paths))
    data = to_json(result)
    checks = cross_check(result, stacks) + cross_check_logs(result, logs)
    common.record(args, KIND, {**data, "evidence": as_evidence(result), "paths": args.paths,
                               "notes": checks})
    if args.json:
        common.print_json(data)
    else:
        # names and paths come from the dumps: no control code reaches the terminal
        sys.stdout.write(clean_block(render(result, args.paths, checks)))
    return problem_if(any(g.first_mismatch or g.stalled for g in result.groups))


def _live(paths: list[str]) -> list[str]:
    """A debug server's address (http://...) read into a folder of per-rank JSON dumps."""
    if not any(p.startswith(("http://", "https://")) for p in paths):
        return paths
    import tempfile
    from pathlib import Path

    from distdoctor.probes.debugserver import flight_recorder

    out = []
    for p in paths:
        if not p.startswith(("http://", "https://")):
            out.append(p)
            continue
        folder = Path(tempfile.mkdtemp(prefix="distdoctor-fr-"))
        if not flight_recorder(p, folder):
            raise UsageError(t("{url}: no rank answered with a Flight Recorder", url=p))
        out.append(str(folder))
    return out


def _seq(op: str | None, seq: int | None) -> str:
    if seq is None:
        return t("no dump")
    if not seq:
        return t("none")
    return f"{op} #{seq}" if op else f"#{seq}"


def render(result: Any, paths: list[str], checks: list[str]) -> str:
    """Plain text: one block per group, then the culprit, notes and what to run next."""
    dumps = result.dumps
    fmts = sorted({d.fmt for d in dumps.values()})
    versions = sorted({d.version for d in dumps.values() if d.version})
    lines = [t("Flight Recorder: {n} dumps ({formats}), ranks {ranks}", n=len(dumps), formats="/".join(fmts),
               ranks=_ranges(dumps))
             + (t(", format {versions}", versions="/".join(versions)) if versions else "")]
    for skipped in result.skipped:
        lines.append("  " + t("skipped {what}", what=clean(skipped)))
    if not result.groups:
        lines.append(t("no collectives recorded: was TORCH_FR_BUFFER_SIZE set (see `distdoctor knobs`)?"))
    for g in result.groups:
        name = t("group {pg}", pg=g.pg) + (f" ({g.desc})" if g.desc else "")
        lines.append("")
        lines.append(t("{group}: ranks {ranks}", group=name, ranks=_ranges(g.ranks)))
        for note in g.notes:
            lines.append("  " + t("({note})", note=note))
        # ranks in the same place share a row, so a 1024-rank job prints its few odd ones out
        rows: dict[tuple[str, str], list[int]] = {}
        for r in g.ranks:
            done, issued = g.last_completed.get(r), g.last_enqueued.get(r)
            key = (_seq(_op_at(dumps.get(r), g.pg, done), done), _seq(g.last_op.get(r), issued))
            rows.setdefault(key, []).append(r)
        head = (t("ranks"), t("last completed"))
        width = max([i18n.cells(head[0])] + [len(_ranges(v)) for v in rows.values()])
        done_w = 22
        lines.append(f"  {i18n.pad(head[0], width)}  {i18n.pad(head[1], done_w)}  {t('last issued')}")
        for (done_text, issued_text), members in rows.items():
            lines.append(f"  {_ranges(members):<{width}}  {i18n.pad(done_text, done_w)}  {issued_text}")
        m = g.first_mismatch
        if m is not None:
            lines.append("  " + t("first disagreement: #{seq} ({kind}): {detail}", seq=m.seq, kind=t(m.kind),
                                  detail=m.detail))
        elif g.stalled:
            lines.append(f"  {g.stalled}")
        else:
            lines.append("  " + t("the ranks agree on every collective they all recorded"))
        if g.never_joined:
            lines.append("  " + t("never joined: {ranks}", ranks=_ranges(g.never_joined)))
        if g.no_dump:
            lines.append("  " + t("no dump from: {ranks}", ranks=_ranges(g.no_dump)))
    c = result.culprit
    lines.append("")
    if c is None:
        lines.append(t("culprit: none found in the dumps"))
    elif not c.ranks:  # an even split: no side is the odd one out
        lines.append(t("culprit: not named: {why}", why=c.why))
        if c.cause:
            lines.append(t("cause: {cause}", cause=c.cause))
    else:
        ranks = ", ".join(str(r) for r in c.ranks)
        who = t("rank {ranks}", ranks=ranks) if len(c.ranks) == 1 else t("ranks {ranks}", ranks=ranks)
        lines.append(t("culprit: {who} ({role}): {why}", who=who, role=t(c.role), why=c.why))
        if c.cause:
            lines.append(t("cause: {cause}", cause=c.cause))
        if c.fr_trace_note:
            lines.append(t("note: {note}", note=c.fr_trace_note))
    for check in checks:
        lines.append(t("note: {note}", note=check))
    lines.append("")
    lines.append(t("next:"))
    lines.append("  distdoctor stacks --job auto      "
                 + t("where each rank is now (confirms or refutes the culprit)"))
    if c is not None and c.cause:
        lines.append(f"  distdoctor knowledge show {c.cause}")
    folders = {os.path.dirname(d.path) for d in dumps.values()}
    gloo = any(e.backend == "gloo" for d in dumps.values() for e in d.entries[:1])
    if fmts == ["pickle"] and len(folders) == 1 and not gloo:
        # fr_trace reads pickles only, and torch 2.13's fails on Gloo dumps (KeyError ('0', 0))
        lines.append(f"  python -m torch.distributed.flight_recorder.fr_trace {clean(shlex.quote(folders.pop()))} "
                     "--allow-incomplete-ranks      " + t("torch's own reading"))
    return "\n".join(lines) + "\n"


def _ranges(ranks: Any) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8'."""
    out: list[str] = []
    for r in sorted(ranks):
        if out and "-" in out[-1] and int(out[-1].split("-")[1]) == r - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{r}"
        elif out and "-" not in out[-1] and int(out[-1]) == r - 1:
            out[-1] = f"{out[-1]}-{r}"
        else:
            out.append(str(r))
    return ", ".join(out)


def _op_at(dump: Any, pg: str, seq: int | None) -> str | None:
    if dump is None or not seq:
        return None
    for e in dump.entries:
        if e.pg == pg and not e.p2p and e.seq == seq:
            return e.op
    return None
