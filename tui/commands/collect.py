"""`distdoctor collect`: this node's snapshot (every probe's facts) as JSON, for the fleet view."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import sys
from pathlib import Path

from distdoctor.knowledge.atomicfile import write_atomic
from distdoctor.knowledge.i18n import t

from ..errors import UsageError
from .common import add_common, knowledge, print_json, require_answer

EPILOG = """\
The snapshot holds host, time, the facts of every probe (versions, shm, launch,
switches, network, topology), the fields nodes must agree on, and the topology
summary. `distdoctor fleet collect` runs this on every node; `distdoctor fleet
compare` finds the odd node out. A probe that cannot run is recorded as
"unavailable" with its reason, and the snapshot is still written.

examples:
  distdoctor collect                         JSON on stdout
  distdoctor collect -o node17.json          write it to a file
  distdoctor collect --python ~/venvs/train/bin/python -o node17.json
  distdoctor fleet collect --via srun -o fleet/
                                             every node of this Slurm allocation

exit codes: 0 snapshot written, 2 bad usage (no such --python, -o not writable)
"""
DESCRIPTION = """\
Snapshot this node for the fleet view: versions, driver, GPUs, /dev/shm,
interfaces, switches, launch variables and topology, as one JSON document."""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "collect", help=t("snapshot this node as JSON (for `fleet compare`)"),
        description=t(DESCRIPTION),
        epilog=t(EPILOG), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--output", metavar="FILE",
                        help=t("write the snapshot to FILE instead of stdout"))
    parser.add_argument("--python", metavar="PATH",
                        help=t("the training job's interpreter to ask about torch/NCCL "
                             "(default: this one)"))
    parser.add_argument("--root", metavar="DIR",
                        help=t("snapshot a recorded node instead of this one: an extracted sos report or "
                               "a root-like tree; its hardware probes read the files, nothing is run"))
    add_common(parser, session=False)
    parser.set_defaults(func=run)


def _recorded_root(path: str) -> Path:
    from distdoctor.probes.recorded import recorded_root

    return recorded_root(path)


def interpreter(path: str | None) -> str:
    """The --python interpreter as an absolute path; a missing one is a usage error."""
    if not path:
        return sys.executable
    found = shutil.which(path) if os.sep not in path else path
    if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise UsageError(t("--python {path}: no such interpreter (give the path of the job's python)", path=path))
    return os.path.abspath(found)


def run(args: argparse.Namespace) -> int:
    from distdoctor.probes.base import ProbeContext
    from distdoctor.probes.fleet import snapshot

    root = _recorded_root(args.root) if args.root else None
    ctx = ProbeContext(python=interpreter(args.python))
    kb = knowledge(args)
    if root is None:
        doc = snapshot(ctx, kb)
    else:
        from distdoctor.probes.recorded import recorded_context, recorded_host, recorded_probes
        from distdoctor.probes.registry import PROBES

        doc = snapshot(recorded_context(root), kb, probes=recorded_probes(PROBES))
        doc["host"] = recorded_host(root)  # the recorded node's name, not this machine's
    # a snapshot is made to be copied between machines: redacted as a report is, names kept
    from ..record.redact import redact
    doc = redact(doc)
    versions = doc["probes"].get("versions") or {}
    if root is None:
        require_answer(args.python, versions.get("facts") or {}, versions.get("reason", ""))
    if not args.output:
        print_json(doc)
        return 0
    write(Path(args.output), json.dumps(doc, indent=1) + "\n")
    if args.json:
        print_json(doc)
    else:
        # on stderr, so `-o /dev/stdout | jq` reads JSON only
        print(t("wrote {file}: {host}, {n} probes in {seconds}s", file=args.output, host=doc["host"],
                n=len(doc["probes"]), seconds=f"{doc['duration_s']:.1f}"), file=sys.stderr)
    return 0


def write(path: Path, text: str) -> None:
    """Write atomically, so a reader never sees half a snapshot. A FIFO or a device (-o
    /dev/stdout) is written in place: renaming over it would replace the device node itself."""
    if path.is_dir():
        raise UsageError(t("-o {path}: is a folder; give a file name such as {path}/node.json", path=path))
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        special = False  # not there yet (or a dangling link): the atomic path reports why
    if special:
        try:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise UsageError(t("-o {path}: cannot write ({why})", path=path, why=exc.strerror or exc)) from None
        return
    # through a symlink, the file it points to is replaced, not the link
    path = Path(os.path.realpath(path))
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise UsageError(t("-o {path}: cannot write there ({why})", path=path, why=exc.strerror or exc)) from None
