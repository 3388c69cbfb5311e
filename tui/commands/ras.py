"""`distdoctor ras`: ask NCCL's RAS thread (via `ncclras`) which ranks are dead, unresponsive or
behind on their collective counts."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from distdoctor.knowledge.i18n import t

from ..errors import UsageError
from . import common
from .exitcodes import OK, problem_if

KIND = "ras"
DESCRIPTION = """\
Query the RAS subsystem of a running NCCL job (NCCL 2.24 or later runs a RAS
thread in every process) with NCCL's `ncclras` client, under a timeout, and
read from it the dead, missing or unresponsive ranks and the ranks whose
collective counts differ from the others'. JSON output is asked for when the
client is NCCL 2.28.7 or later (`ncclras -f json`), text otherwise.

Run it on a node where the job runs (the client connects to localhost:28028,
or NCCL_RAS_ADDR: give --host/--port then). --input reads a saved ncclras
output (text or JSON) instead."""
EPILOG = """\
examples:
  distdoctor ras                          ask the job running on this node
  distdoctor ras --json                   machine-readable facts and evidence
  distdoctor ras --host 10.0.0.7 --port 28028
  ncclras -f json > ras.json; distdoctor ras --input ras.json

exit codes: 0 every rank answered and agrees, or ncclras is unavailable or
            unreachable here (one "unavailable: ..." line); 1 dead/unresponsive
            ranks or count mismatches; 2 unreadable --input, or bad usage
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("ras", help=t("NCCL RAS (ncclras): dead, unresponsive and lagging ranks"),
                            description=t(DESCRIPTION), epilog=t(EPILOG),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", metavar="FILE", help=t("read a saved ncclras output instead of asking"))
    parser.add_argument("--host", metavar="HOST", help=t("RAS client address of the job (ncclras -h)"))
    parser.add_argument("--port", type=int, metavar="PORT", help=t("RAS client port (ncclras -p; default 28028)"))
    parser.add_argument("--timeout", type=int, default=5, metavar="SECS",
                        help=t("how long NCCL waits for the other processes (ncclras -t; default 5)"))
    common.add_common(parser)
    parser.set_defaults(func=run)


def _from_file(path: str) -> dict[str, Any]:
    from distdoctor.probes.ras import parse

    try:
        with open(path, "rb") as fh:
            data = fh.read(64 * 1024 * 1024)
        text = data.decode("utf-8")
    except OSError as exc:
        raise UsageError(t("--input {path}: cannot read ({why})", path=path, why=exc.strerror or exc)) from None
    except UnicodeDecodeError:
        raise UsageError(t("--input {path}: not text (binary data), not an ncclras output", path=path)) from None
    try:
        facts = parse(text)
    except ValueError as exc:
        raise UsageError(t("--input {path}: {error}", path=path, error=exc)) from None
    if facts["format"] == "text" and not facts["nccl_version"] and not facts["communicators"]:
        raise UsageError(t("--input {path}: not an ncclras output (no 'NCCL version' line, no communicators)",
                           path=path))
    return facts


def run(args: argparse.Namespace) -> int:
    from distdoctor.probes.base import ProbeContext
    from distdoctor.probes.ras import as_evidence, probe_ras, problems

    if args.timeout < 0:
        raise UsageError(t("--timeout must be 0 or more"))
    if args.input:
        facts = _from_file(args.input)
    else:
        result = probe_ras(ProbeContext(), host=args.host, port=args.port, timeout_s=args.timeout)
        if result.status == "unavailable":
            common.record(args, KIND, {"status": "unavailable", "reason": result.reason})
            if args.json:
                common.print_json({"status": "unavailable", "reason": result.reason})
            else:
                print(t("unavailable: {reason}", reason=result.reason))
            return OK  # could not look: not bad usage (exitcodes.py)
        facts = dict(result.facts)
    evidence = as_evidence(facts)
    data = {"status": "fail" if problems(facts) else "ok", "facts": facts, "evidence": evidence}
    common.record(args, KIND, data)
    if args.json:
        common.print_json(data)
    else:
        sys.stdout.write(render(facts, evidence))
    return problem_if(bool(problems(facts)))


def _who(w: dict[str, Any]) -> str:
    rank = t("rank {rank} ", rank=w["rank"]) if w.get("rank") is not None else ""
    return rank + t("(pid {pid} on {host}, GPU {gpu})", pid=w.get("pid"), host=w.get("host"), gpu=w.get("gpu"))


# the titles are catalogue keys (t(title) in render)
TITLES = (("dead", "dead"), ("unresponsive", "unresponsive"), ("missing", "missing"), ("errors", "errors"))


def render(facts: dict[str, Any], evidence: list[dict[str, Any]]) -> str:
    lines = [t("NCCL RAS ({format} output, NCCL {version}): {n} communicator group(s)", format=facts["format"],
               version=facts.get("nccl_version") or "?", n=len(facts["communicators"]))]
    for title, key in TITLES:
        for w in facts[key]:
            extra = f": {w['error']}" if key == "errors" else ""
            lines.append(f"  {t(title)}{t(': ')}{_who(w)}{extra}")
    for m in facts["mismatches"]:
        odd = t(", ").join(t("rank {rank} at {count}", rank=r, count=m["counts"].get(r)) for r in m.get("odd") or [])
        lines.append("  " + t("mismatch: {op} counts in communicator {comm}: most at {majority}; {odd}", op=m["op"],
                              comm=m["comm"], majority=m.get("majority"), odd=odd or t("see ncclras -v")))
    if facts.get("timeouts"):
        lines.append("  " + t("{n} RAS timeout(s) while gathering: some answers may be missing", n=facts["timeouts"]))
    if not evidence:
        lines.append(t("every rank answered and they agree on their collective counts"))
    for item in evidence:
        who = ", ".join(item["ranks"]) or "?"
        lines.append(t("evidence: rank(s) {ranks} ({role}): {why}", ranks=who, role=t(item["role"] or "error"),
                       why=item["why"])
                     + (t(" [cause {cause}]", cause=item["cause"]) if item.get("cause") else ""))
    lines.append("")
    lines.append(t("next:"))
    lines.append("  distdoctor stacks --job auto      " + t("where each local rank is now"))
    lines.append("  ncclras -v                        " + t("NCCL's own, more verbose report"))
    return "\n".join(lines) + "\n"
