"""`distdoctor check`: what is wrong with this node for distributed training, with next actions."""
from __future__ import annotations

import argparse
import math
import os
import shutil
import socket
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distdoctor.knowledge.i18n import t

from ..errors import UsageError
from . import common
from .check_text import render

KIND = "check"
MAX_DEADLINE = 3600.0
DESCRIPTION = """\
Check this node (or a running rank) for what breaks distributed training: versions (torch, CUDA,
NCCL, driver), /dev/shm, launch variables, NCCL/torch switches, network (interfaces, NCCL/Gloo
interface selection, MASTER_ADDR/MASTER_PORT) and GPU topology. All probes run at once under one
deadline; torch is asked in a subprocess of the target interpreter, never imported here."""
EPILOG = """\
examples:
  distdoctor check                                  this node, this environment
  distdoctor check --python /opt/venv/bin/python    the job's interpreter instead of this one
  distdoctor check --pid 12345                      a running rank's environment (/proc/PID/environ)
  distdoctor check --only network shm --json        two probes, machine-readable
  MASTER_ADDR=node0 MASTER_PORT=29500 distdoctor check --only network

probes: versions, shm, launch, switches, network, topology
exit codes: 0 nothing failed (warnings allowed), 1 a check failed, 2 bad usage
"""
EPILOG_HARDWARE = """
hardware and recorded nodes:
  distdoctor check --only kernel gpu_health pcie infiniband limits
                                  Xids, ECC and row remapping, GPU links, ACS/IOMMU, IB ports, memlock
  distdoctor check --root sosreport-node17/
                                  a recorded node (an extracted sos report or a root tree): the
                                  hardware probes read its files; nothing is run
  distdoctor check --prometheus /var/lib/node_exporter/textfile/distdoctor.prom
                                  the findings as node_exporter textfile metrics too
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("check", help=t("what is wrong with this node for distributed training"),
                            description=t(DESCRIPTION), epilog=t(EPILOG) + t(EPILOG_HARDWARE),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_common(parser)
    parser.add_argument("--python", metavar="PATH",
                        help=t("interpreter to ask about torch/CUDA/NCCL (default: this one, or "
                             "the --pid process's)"))
    parser.add_argument("--pid", type=int, metavar="PID",
                        help=t("judge this running rank's environment from /proc/PID/environ"))
    parser.add_argument("--only", nargs="+", action="extend", metavar="PROBE",
                        help=t("run only these probes"))
    parser.add_argument("--deadline", type=float, default=10.0, metavar="S",
                        help=t("give up on probes that have not answered after S seconds (default 10)"))
    parser.add_argument("--root", metavar="DIR",
                        help=t("read a recorded node instead of this one: an extracted sos report or a "
                               "root-like tree (proc/, sys/, etc/, var/log/); nothing is run"))
    parser.add_argument("--prometheus", metavar="FILE",
                        help=t("also write the findings as metrics for node_exporter's textfile collector "
                               "(replaced atomically)"))
    parser.set_defaults(func=run)


def _interpreter(value: str | None, pid: int | None, pid_env: Mapping[str, str]) -> str:
    """--python as given (a path or a name on PATH); else the --pid process's python; else ours."""
    if value:
        path = value if os.sep in value else shutil.which(value)
        if not path:
            raise UsageError(t("--python {value}: no such interpreter (not a path, and not on PATH)", value=value))
        if os.path.isdir(path):
            raise UsageError(t("--python {value}: no such interpreter ({path} is a directory)", value=value, path=path))
        if not os.path.isfile(path):
            raise UsageError(t("--python {value}: no such interpreter (no file {path})", value=value, path=path))
        if not os.access(path, os.X_OK):
            raise UsageError(t("--python {value}: no such interpreter ({path} is not executable)", value=value,
                               path=path))
        return os.path.abspath(path)
    if pid is not None:
        return _pid_python(pid, pid_env) or sys.executable
    return sys.executable


def _pid_python(pid: int, env: Mapping[str, str]) -> str | None:
    """The rank's own interpreter: argv[0] when it is a python path, else its virtualenv's."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv0 = fh.read(4096).split(b"\0")[0].decode("utf-8", "replace")
    except OSError:
        argv0 = ""
    candidates = [argv0] if os.path.isabs(argv0) and "python" in os.path.basename(argv0) else []
    if env.get("VIRTUAL_ENV"):
        candidates.append(os.path.join(env["VIRTUAL_ENV"], "bin", "python"))
    return next((c for c in candidates if os.path.isfile(c) and os.access(c, os.X_OK)), None)


def _plain(value: Any) -> Any:
    """Facts as plain JSON types (probes may hand back read-only mapping proxies)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _knowledge(args: argparse.Namespace):
    """The knowledge base without the method-tree check: `check` never walks the tree, and the
    check imports networkx (~0.2 s). `distdoctor knowledge validate` still checks the tree."""
    from distdoctor.knowledge import KnowledgeError, load_knowledge

    try:
        return load_knowledge(getattr(args, "knowledge", None), tree=False)
    except KnowledgeError as exc:
        raise UsageError(t("knowledge: {error}", error=exc)) from None


def _recorded_root(args: argparse.Namespace):
    """--root as a checked folder, or None for this machine."""
    if not getattr(args, "root", None):
        return None
    from distdoctor.probes.recorded import recorded_root

    return recorded_root(args.root)


def _recorded_probes() -> tuple[str, ...]:
    from distdoctor.probes.recorded import RECORDED_PROBES

    return RECORDED_PROBES


def _host(root: Any) -> str:
    if root is None:
        return socket.gethostname()
    from distdoctor.probes.recorded import recorded_host

    return recorded_host(root)


def run(args: argparse.Namespace) -> int:
    from distdoctor.probes.base import ProbeContext
    from distdoctor.probes.procenv import EnvUnreadable, read_environ
    from distdoctor.probes.registry import PROBES
    from distdoctor.probes.sweep import run_sweep, select

    start = time.monotonic()
    if not (math.isfinite(args.deadline) and 0 < args.deadline <= MAX_DEADLINE):
        raise UsageError(t("--deadline must be a positive number of seconds (at most {most})",
                           most=f"{MAX_DEADLINE:g}"))
    twice = sorted({name for name in args.only or () if args.only.count(name) > 1})
    if twice:
        raise UsageError(t("--only: {name} is named more than once", name=repr(twice[0])))
    if getattr(args, "root", None) and args.pid is not None:
        raise UsageError(t("--root reads a recorded node: --pid cannot be used with it"))
    root = _recorded_root(args)
    if args.prometheus:  # a bad path fails now, not after the probes have run
        from .check_prometheus import check_target

        check_target(args.prometheus)
    try:
        probes = select(PROBES, args.only or (_recorded_probes() if root else None))
    except KeyError as exc:
        raise UsageError(t("--only: unknown probe {name} (choose from: {probes})", name=repr(exc.args[0]),
                           probes=", ".join(PROBES))) from None
    pid_env: Mapping[str, str] = {}
    if args.pid is not None:
        if args.pid <= 0:
            raise UsageError(t("--pid {pid}: not a process id", pid=args.pid))
        try:
            pid_env = read_environ(ProbeContext(), args.pid)
        except EnvUnreadable as exc:
            raise UsageError(t("--pid {pid}: {error}", pid=args.pid, error=exc)) from None
    python = _interpreter(args.python, args.pid, pid_env)
    # Commands get most of the deadline, so a slow one is killed and reported with its reason
    # before the sweep gives up on its probe.
    ctx = ProbeContext(python=python, pid=args.pid, timeout=max(0.5, args.deadline * 0.9))
    if root is not None:
        from distdoctor.probes.recorded import recorded_context

        ctx = recorded_context(root, timeout=ctx.timeout)
    box: dict[str, Any] = {}

    def sweep_probes() -> None:
        try:
            box["results"] = run_sweep(ctx, probes, deadline=args.deadline)
        except Exception as exc:  # re-raised below, in the main thread, with its traceback
            box["error"] = exc

    sweep = threading.Thread(target=sweep_probes, daemon=True, name="check-sweep")
    sweep.start()
    kb = _knowledge(args)  # loads while the probes run: the torch subprocess is the long part
    sweep.join()
    if "error" in box:
        raise box["error"]
    from distdoctor.knowledge.evaluate import evaluate

    results = box["results"]
    versions = results.get("versions")
    if versions is not None and root is None:
        common.require_answer(args.python, versions.facts, versions.reason)
    findings = evaluate(kb, results)
    data = {
        "host": _host(root),
        "duration_s": round(time.monotonic() - start, 3),
        "findings": [f.to_dict() for f in findings],
        "facts": {name: _plain(r.facts) for name, r in results.items()},
        "probes": {name: {"status": r.status, "reason": r.reason,
                          "duration_s": round(r.duration_s, 3)} for name, r in results.items()},
    }
    from ..record.redact import redact
    data = redact(data)  # secret-named switches (NCCL_RAS_TOKEN) and token shapes: as in a report
    if root is not None:  # as given: an archive is read from a temporary copy of its files
        data["root"] = str(Path(args.root).resolve())
    common.record(args, KIND, data)
    if args.prometheus:
        from .check_prometheus import write_metrics

        write_metrics(args.prometheus, data)
    if args.json:
        common.print_json(data)
    else:
        render(data)
    return 1 if any(f.status == "fail" for f in findings) else 0
