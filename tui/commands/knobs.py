"""`distdoctor knobs`: the exact environment lines that make evidence exist for this torch/NCCL."""
from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import Any

from distdoctor.knowledge.i18n import t

from . import common
from .exitcodes import OK

KIND = "knobs"
DESCRIPTION = """\
Print the environment lines (and launcher options) that turn on every source
of evidence the job's stack supports: NCCL logs, TORCH_DISTRIBUTED_DEBUG,
Flight Recorder (under its current or older names, with dump on timeout and
the dump path), TORCH_NCCL_ASYNC_ERROR_HANDLING, NCCL RAS, and per-rank
launcher logs. The torch and NCCL versions come from the job's interpreter,
asked in a subprocess; each line says which versions it applies to. Set them
before the run that you expect to hang again."""
EPILOG = """\
examples:
  distdoctor knobs                                 for this interpreter
  distdoctor knobs --python ~/venvs/train/bin/python
  distdoctor knobs --json                          {"torch", "nccl", "lines": [...], "missing": [...]}

exit codes: 0 lines printed, 2 bad usage (no such --python, an interpreter that
            does not answer)
"""
GLOO_NOTE = """\
# Gloo has no dump on timeout: with TORCH_FR_BUFFER_SIZE set, dump from the job
# with torch._C._distributed_c10d._dump_fr_trace_json() (one file per rank, named
# <prefix><rank>), then run `distdoctor fr DIR`"""
# the titles are catalogue keys (t(TITLES[source]) in render)
TITLES = {"nccl-logs": "NCCL logs", "torch-debug": "torch.distributed debug output",
          "flight-recorder": "Flight Recorder", "error-handling": "NCCL error handling",
          "ras": "NCCL RAS", "launcher": "per-rank logs from the launcher"}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("knobs", help=t("the environment lines that turn on logs, Flight Recorder and RAS"),
                            description=t(DESCRIPTION), epilog=t(EPILOG),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", metavar="PATH",
                        help=t("the training job's interpreter to ask about torch/NCCL (default: this one)"))
    common.add_common(parser)
    parser.set_defaults(func=run)


def collect(python: str) -> dict[str, Any]:
    """Ask the interpreter for its versions and build the document (for the app's Logs step too)."""
    from distdoctor.probes.base import ProbeContext
    from distdoctor.probes.knobs import knob_lines, missing_sources, versions_of
    from distdoctor.probes.versions import probe_versions

    result = probe_versions(ProbeContext(python=python, timeout=60.0))
    facts = dict(result.facts)
    torch, nccl, has_nccl = versions_of(facts)
    note = ""
    if result.status == "unavailable":
        note = t("versions unknown ({reason}): lines for every version", reason=result.reason)
    elif torch is None:
        note = t("no torch in {python}: lines for every version", python=python)
    return {"python": python, "torch": torch, "nccl": nccl, "has_nccl": has_nccl, "note": note,
            "lines": [asdict(k) for k in knob_lines(torch, nccl, has_nccl=has_nccl)],
            "missing": missing_sources(torch, nccl, has_nccl=has_nccl),
            "_facts": facts, "_reason": result.reason}


def run(args: argparse.Namespace) -> int:
    from .collect import interpreter

    python = interpreter(args.python)
    doc = collect(python)
    common.require_answer(args.python, doc.pop("_facts"), doc.pop("_reason"))
    common.record(args, KIND, doc)
    if args.json:
        common.print_json(doc)
    else:
        sys.stdout.write(render(doc))
    return OK


def render(doc: dict[str, Any]) -> str:
    nccl = doc["nccl"] or (t("none (CPU build)") if doc["has_nccl"] is False else t("unknown"))
    lines = [t("torch {torch}, NCCL {nccl} ({python})", torch=doc["torch"] or t("unknown"), nccl=nccl,
               python=doc["python"])]
    if doc["note"]:
        lines.append(t("note: {note}", note=doc["note"]))
    width = max((len(x["line"]) + (7 if x["kind"] == "env" else 0) for x in doc["lines"]), default=0)
    source = None
    for x in doc["lines"]:
        if x["source"] != source:
            source = x["source"]
            lines += ["", f"# {t(TITLES[source]) if source in TITLES else source}"]
        shown = f"export {x['line']}" if x["kind"] == "env" else x["line"]
        # the probe's sentence is a catalogue key (probes/knobs.py KNOBS; test_i18n_cli checks them)
        lines.append(f"{shown:<{width}}  # {t(x['what'])} [{t(x['applies'])}]")
    if doc["has_nccl"] is False:
        lines += [""] + t(GLOO_NOTE).splitlines()
    for why in doc["missing"]:
        lines.append(t("not available: {why}", why=why))
    return "\n".join(lines) + "\n"
