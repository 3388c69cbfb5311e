"""`distdoctor topo`: GPU topology, the P2P and NVLink verdicts, and what to set."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from distdoctor.knowledge.i18n import t

from ..errors import UsageError
from .common import add_common, print_json, record, wrap
from .exitcodes import OK, problem_if

EPILOG = """\
examples:
  distdoctor topo                          this node (NVML, else nvidia-smi topo)
  distdoctor topo --input topo.txt         a saved `nvidia-smi topo -m` (new or old driver)
  distdoctor topo --input p2p.txt          `nvidia-smi topo -p2p r` output
  nvidia-smi topo -m | distdoctor topo --input -
                                           standard input
  distdoctor topo --input topo.xml         NCCL_TOPO_DUMP_FILE output (a cut-off file is read too)
  distdoctor topo --input rank0.log        NCCL_DEBUG=INFO lines (transports, P2P disabled, NVLS)
  distdoctor topo --matrix                 a topo -m like grid with P2P marks
  distdoctor topo --dot topo.dot && dot -Tsvg topo.dot -o topo.svg
  distdoctor topo --json --session incident-42

on a GPU node, to look at it elsewhere:
  nvidia-smi topo -m > topo.txt && nvidia-smi topo -p2p r >> topo.txt
  distdoctor topo --input topo.txt

exit codes: 0 P2P works everywhere, nothing to act on, or no topology here (no NVIDIA
driver: one "unavailable: ..." line); 1 P2P is missing on some or all pairs (the advice
says what to set); 2 unreadable input or bad usage.
"""

NO_SOURCE_HINT = ("on a GPU node run `nvidia-smi topo -m > topo.txt && nvidia-smi topo -p2p r >> topo.txt`,"
                  " then `distdoctor topo --input topo.txt`")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "topo", help=t("GPU topology: P2P support, NVLink, NIC affinity and what to set"),
        description=t("Reads the GPU topology (live NVML, nvidia-smi topo, NCCL topology XML or NCCL INFO "
                    "logs), decides whether peer-to-peer works between each GPU pair, and says what to set."),
        epilog=t(EPILOG), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", metavar="FILE",
                        help=t("read this file instead of the live machine ('-' for stdin); the format is "
                             "detected from the content"))
    parser.add_argument("--dot", metavar="FILE", help=t("also write a Graphviz graph ('-' for stdout)"))
    parser.add_argument("--svg", metavar="FILE", help=t("also write an SVG picture"))
    parser.add_argument("--matrix", action="store_true", help=t("show a topo -m like grid instead of the drawing"))
    add_common(parser)
    parser.set_defaults(func=run)


def collect(args: argparse.Namespace) -> dict[str, Any] | str:
    """The topology facts, or the reason the live machine has none (a string)."""
    from distdoctor.probes.topology import load_input

    if args.input:
        if args.input == "-" and sys.stdin is not None and sys.stdin.isatty():
            # reading a terminal would wait, silently, for someone to type a matrix
            raise UsageError(t("--input - reads standard input, which is a terminal here: pipe the "
                               "output in, e.g. nvidia-smi topo -m | distdoctor topo --input -"))
        return load_input(args.input)
    from distdoctor.probes.base import UNAVAILABLE, ProbeContext
    from distdoctor.probes.topology import probe_topology

    result = probe_topology(ProbeContext())
    if result.status == UNAVAILABLE:
        # not bad usage: the node has no topology to read (exitcodes.py: unavailable is OK)
        return str(result.reason)
    return dict(result.facts)


def write(path: str, text: str) -> None:
    if path == "-":
        print(text, end="")
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(t("cannot write {path}: {why}", path=path, why=exc.strerror or exc)) from None


def advice_lines(facts: dict[str, Any], width: int = 80) -> list[str]:
    """Advice wrapped for a terminal (by display width: common.wrap); command lines (indented)
    are kept whole for copy-paste."""
    lines: list[str] = []
    if facts["advice"]:
        lines += ["", t("What to do")]
    for entry in facts["advice"]:
        for i, part in enumerate(entry["text"].split("\n")):
            if part.startswith("  "):
                lines.append("  " + part)
            else:
                lines += wrap(part, width, "- " if i == 0 else "  ", "  ")
    if facts["notes"]:
        lines += ["", t("Notes")]
        for note in facts["notes"]:
            lines += wrap(note, width, "- ", "  ")
    return lines


def stdout_flags(args: argparse.Namespace) -> list[str]:
    """The outputs that want stdout: --json, and --dot/--svg given '-'."""
    flags = [f"--{name} -" for name in ("dot", "svg") if getattr(args, name) == "-"]
    return flags + (["--json"] if args.json else [])


def run(args: argparse.Namespace) -> int:
    from distdoctor.probes.topology import draw_matrix, draw_text, to_dot, to_svg

    on_stdout = stdout_flags(args)
    if len(on_stdout) > 1:  # two documents on one stream is neither valid JSON nor a valid graph
        raise UsageError(t("{flags} would both write to stdout: give the picture a file name",
                           flags=t(" and ").join(on_stdout)))
    facts = collect(args)
    if isinstance(facts, str):
        return unavailable(args, facts)
    if args.dot:
        write(args.dot, to_dot(facts))
    if args.svg:
        write(args.svg, to_svg(facts))
    record(args, "topo", facts)
    if args.json:
        print_json(facts)
    elif not on_stdout:
        print(draw_matrix(facts) if args.matrix else draw_text(facts))
        print("\n".join(advice_lines(facts)))
    return problem_if(facts["p2p"] in ("none", "partial"))


def unavailable(args: argparse.Namespace, reason: str) -> int:
    """No topology on this node: one line (or a JSON object) that says why and what to run."""
    from .common import _NOTES

    data = {"status": "unavailable", "reason": reason, "hint": NO_SOURCE_HINT}
    if getattr(args, "session", None):  # a session's topo event is a drawing; there is none
        _NOTES.append(t("distdoctor: nothing saved to session {session}: no topology on this node",
                        session=args.session))
    if args.json:
        print_json(data)
    else:  # `--dot -` keeps stdout for the graph, so the line goes to stderr then
        print(t("unavailable: {reason}; {hint}", reason=reason, hint=t(NO_SOURCE_HINT)),
              file=sys.stderr if stdout_flags(args) else sys.stdout)
    if args.dot or args.svg:
        print(t("distdoctor: nothing drawn: no topology on this node"), file=sys.stderr)
    return OK
