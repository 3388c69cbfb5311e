"""`distdoctor logs`: read every rank's logs and name the root cause, with the lines that prove it."""
from __future__ import annotations

import argparse
import sys

from distdoctor.knowledge.i18n import t
from distdoctor.knowledge.printable import clean_block

from ..errors import UsageError
from . import common

KIND = "logs"
DESCRIPTION = """\
Read the logs of every rank (files, directories, globs, .gz/.bz2/.xz, - for
stdin), find the first failure and the ranks left waiting, and rank the likely
root causes with the log lines that support each. Watchdog lines give each
rank's last collective (SeqNum, OpType), which separates a crashed rank from a
straggler from ranks on different code paths; NCCL INFO lines give per-rank
versions, interfaces and transports, and the ones that disagree.

Binary, non-UTF-8, empty and unreadable inputs (FIFOs, devices, broken links)
are skipped and listed. Turn on NCCL_DEBUG=INFO and
TORCH_DISTRIBUTED_DEBUG=DETAIL before collecting logs: most causes show there."""
EPILOG = """\
examples:
  distdoctor logs ./job-1234/                      every file under the folder
  distdoctor logs 'logs/rank*.log' --symptom hang  a glob; the job hung
  distdoctor logs slurm-1234.out.gz --json         compressed, machine-readable
  kubectl logs pod/trainer-0 | distdoctor logs -   standard input
  distdoctor logs ./job-1234/ --session inc-42     add the result to a session

bounds: a compressed file or standard input is read up to --max-bytes (default
1G); a compressed file that expands more than 100x stops after 8M, with a note
(a decompression bomb); `**` never follows a link to a directory.

exit codes: 0 no failure in the logs, or not enough evidence to name a cause
            (the verdict says "unknown" and what to collect next), 1 a cause was
            found (confirmed or likely), 2 nothing readable was given, or bad usage
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("logs", help=t("rank root causes from the logs of every rank"),
                            description=t(DESCRIPTION), epilog=t(EPILOG),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help=t("log files, directories, globs, .gz files, or - for standard input"))
    parser.add_argument("--symptom", metavar="ID",
                        help=t("what the job did: hang or error (or a sub-symptom id such as "
                               "hang-init); shifts the ranking the way the guide does"))
    parser.add_argument("--top", type=int, default=5, metavar="N",
                        help=t("show the N best causes (default 5; --json always has all)"))
    parser.add_argument("--max-bytes", metavar="SIZE", dest="max_bytes",
                        help=t("read at most SIZE bytes of each compressed file or of standard input "
                               "(e.g. 500M, 4G; default 1G, and a compressed file that expands more "
                               "than 100x stops after 8M); plain files are read whole"))
    common.add_common(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from distdoctor.knowledge.logs import analyse
    from distdoctor.knowledge.logs.bounds import limits, parse_size

    try:
        max_bytes = parse_size(args.max_bytes) if args.max_bytes is not None else None
    except ValueError as exc:
        raise UsageError(t("--max-bytes: {why}", why=exc)) from None
    kb = common.knowledge(args)
    if args.symptom and args.symptom not in kb.symptoms and args.symptom not in ("hang", "error"):
        known = ", ".join(sorted(kb.symptoms)) or "hang, error"
        raise UsageError(t("--symptom {symptom}: unknown symptom (one of: {known})", symptom=args.symptom,
                           known=known))
    if args.top < 1:
        raise UsageError(t("--top must be at least 1"))
    if args.paths.count("-") > 1:
        raise UsageError(t("- (standard input) can be given only once"))
    if "-" in args.paths and sys.stdin is None:  # started with stdin closed (`<&-`)
        raise UsageError(t("- reads standard input, which is closed here"))
    if "-" in args.paths and sys.stdin.isatty():
        # reading a terminal would wait, silently, for someone to type a log
        raise UsageError(t("- reads standard input, which is a terminal here: pipe a log in, "
                           "e.g. kubectl logs pod/trainer-0 | distdoctor logs -"))
    with common.still_waiting(t("still reading the logs ({paths})", paths=", ".join(args.paths)[:60])):
        with limits(max_bytes, on_wait=lambda msg: print(f"distdoctor: {msg}", file=sys.stderr, flush=True)):
            report = analyse(args.paths, kb, symptom=args.symptom)
    if report.nothing_readable():
        raise UsageError(report.nothing_readable())
    from distdoctor.probes.topology_paste import add_pasted_topology

    found = report.to_dict()
    add_pasted_topology(found, args.paths, args.symptom)
    data, diagnosis = conclude(found, kb, args.symptom)
    remember(data, args.session)
    common.record(args, KIND, data)
    if args.json:
        common.print_json(data)
    else:
        from .logs_text import render  # not for --json: it brings shutil and ~1 ms of its own

        sys.stdout.write(clean_block(render(data, kb, top=args.top)))  # nothing raw from the logs
    return diagnosis.exit_code


def conclude(report: dict, kb, symptom: str | None):
    """The log analysis through the one diagnosis: (the JSON result, the Diagnosis). What to
    collect next names the exact switches for the versions the logs show."""
    from distdoctor.knowledge.diagnosis import IncidentEvidence, diagnose, log_result

    diagnosis = diagnose(kb, IncidentEvidence(symptom=symptom, logs=report, collect=_knob_lines(report)))
    return log_result(report, diagnosis, symptom), diagnosis


def remember(data: dict, session: str | None) -> None:
    """Past incidents like this one (the incident history): the same failure signature, or the
    same culprit host with a hardware or network cause, with what fixed them; and whether the
    culprit's host is a repeat offender. Reads only, and never costs the result."""
    if not data["verdict"].get("failed"):
        return
    from ..record import history

    memory: dict = {}
    if history.anything_to_recall():  # else nothing was seen before: no store is opened (or created)
        # with --session the recording that follows says once what is wrong with the store
        memory = history.recall(data, session_id=session, on_error=(lambda exc: None) if session else None)
    data["verdict"]["seen_before"] = memory.get("seen_before") or []
    data["verdict"]["repeat_offender"] = memory.get("repeat_offender")


def _knob_lines(report: dict) -> tuple[str, ...]:
    """The environment lines that make the evidence exist next time, for the torch and NCCL
    versions the logs name (every alternative when they name none)."""
    from distdoctor.probes.knobs import knob_lines

    values = (report.get("facts") or {}).get("values") or {}
    nccl = next(iter(values.get("nccl_version") or {}), None)
    gloo = ((report.get("facts") or {}).get("job") or {}).get("backend") == "gloo"
    return tuple(f"export {k.line}" for k in knob_lines(None, nccl, has_nccl=False if gloo and not nccl else None)
                 if k.kind == "env")
