"""`distdoctor watch`: watch a job started without distdoctor, catch its hang as it happens and
capture the evidence; the job is ended only with --kill-on-hang."""
from __future__ import annotations

import argparse

from distdoctor.knowledge.i18n import t

from ..errors import UsageError
from . import common, watch_view
from .stacks import add_job_choice

KIND = "watch"
DESCRIPTION = """\
Watch a training job that is already running on this node (found as
`distdoctor stacks --job auto` finds it, or given by its ranks' pids): every
rank's progress is sampled (its log growing with --logs, its CPU time, its
stack when it is busy), and no rank progressing for --stall seconds is a
confirmed hang. Then every rank's Python and native stacks, the Flight
Recorder dumps, NCCL RAS, the logs and, with a GPU, nvidia-smi and the
kernel log are taken and the verdict names the culprit rank. The job is
never ended unless --kill-on-hang is given; watch exits when the job ends or
the hang is confirmed and captured."""
EPILOG = """\
--json prints the same object as `distdoctor run --json` (exit_code is null:
the job is not distdoctor's child).

examples:
  distdoctor watch                                the one job on this node
  distdoctor watch --stall 60 --logs ./rank-logs  its per-rank logs too
  distdoctor watch --pid 4242 4243 --json
  distdoctor watch --job 10.0.0.1:29500 --kill-on-hang

exit codes: 0 the job finished, 1 it failed or hung, 2 bad usage or no job
            found
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("watch", help=t("watch a running job and catch its hang as it happens"),
                            description=t(DESCRIPTION), epilog=t(EPILOG),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_job_choice(parser)
    parser.add_argument("--logs", nargs="+", action="extend", default=[], metavar="PATH",
                        help=t("the job's log files or folders (torchrun --log-dir): their growth is "
                               "progress, and they are read for the verdict"))
    parser.add_argument("--kill-on-hang", action="store_true",
                        help=t("end the job once the hang is captured"))
    watch_view.add_watch_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import os

    from distdoctor.probes.watch import WatchConfig, watch_job
    from distdoctor.probes.watch.procs import alive
    from distdoctor.probes.watch.targets import Running, by_job, by_pids
    from distdoctor.probes.watch.watcher import default_stall
    from distdoctor.tui.record.session import new_id

    from .stacks import _pick

    for path in args.logs:
        if not os.path.exists(path):
            raise UsageError(t("--logs {path}: no such file or folder", path=path))
    if args.pid:
        gone = [p for p in args.pid if not alive(p)]
        if gone:
            raise UsageError(t("--pid {pids}: no such running process", pids=" ".join(map(str, gone))))
        find = by_pids(args.pid)
    else:
        from distdoctor.probes.stacks import find_jobs

        ranks, _, found = _pick(args)
        pids = {r.pid for r in ranks}
        # the job by its id, so ranks an elastic restart brings are followed; else its pids
        job = next((j for j in find_jobs() if {r.pid for r in j.ranks} == pids), None)
        find = by_job(job.id) if job is not None else by_pids(sorted(pids))
    kb = common.knowledge(args)  # a broken overlay is bad usage now, not after the job
    session_id = new_id()
    shared = watch_view.shared_dir(args, [], _rank_env(args.pid or sorted(pids)))
    evidence = watch_view.evidence_dir(args, session_id, shared)
    args.evidence_path = str(evidence)
    stall = args.stall or default_stall()
    watch_view.say(t("watching the job (stall {stall}s), evidence in {dir}", stall=f"{stall:g}", dir=evidence))
    config = WatchConfig(stall_s=stall, evidence=evidence, kill_on_hang=args.kill_on_hang,
                         native=not args.no_native, kb=kb,
                         debug_server=watch_view.debug_server(args)[0],
                         debug_server_given=watch_view.debug_server(args)[1], log_sources=list(args.logs),
                         shared=shared)
    outcome = watch_job(Running(find), config)
    return watch_view.finish(args, outcome, session_id, KIND)


def _rank_env(pids: list[int]) -> dict[str, str]:
    """A rank's environment (which node of how many, from torchrun's GROUP_RANK and
    GROUP_WORLD_SIZE or Slurm's); {} when none can be read."""
    from distdoctor.probes.base import ProbeContext
    from distdoctor.probes.procenv import EnvUnreadable, read_environ

    for pid in pids:
        try:
            return read_environ(ProbeContext(), pid)
        except EnvUnreadable:
            continue
    return {}
