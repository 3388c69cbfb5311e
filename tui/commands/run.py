"""`distdoctor run -- LAUNCHER ARGS...`: run the job's own launch line with the evidence switches
on, watch every rank's progress, and on a confirmed hang or a failure capture the evidence, give
the verdict and end the job cleanly."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from distdoctor.knowledge.i18n import t

from ..errors import UsageError
from . import common, watch_view

KIND = "run"
DESCRIPTION = """\
Run a training job's own launch line, unchanged (torchrun or python -m
torch.distributed.run, srun, accelerate launch, deepspeed, or a plain python
script that calls mp.spawn), and catch a hang as it happens. The evidence
switches for the job's torch and NCCL are turned on (Flight Recorder buffer
and dump on timeout, async error handling, NCCL warnings; torchrun gets one
log file per rank when it has no --log-dir), none of which changes what the
job computes; its output still reaches the terminal (on stderr with --json).

Every rank's progress is sampled: its log growing, its CPU time, and its
stack (py-spy) when it is busy. No rank progressing for --stall seconds is a
confirmed hang: every rank's Python and native stacks, the Flight Recorder
dumps, NCCL RAS, the per-rank logs and, with a GPU, nvidia-smi and the
kernel log are taken, the verdict names the culprit rank, a session and a
report are saved, and the job is ended (--keep-running leaves it). When a
rank dies, the survivors' stacks are taken before the launcher tears them
down."""
EPILOG = """\
--json prints one object at the end: {"outcome": "finished" | "failed" |
"hang", "exit_code" (the job's), "hang": {"confirmed_at",
"detected_after_s"} or null, "verdict": {"culprit", "summary"}, "causes",
"stragglers": [{"rank", "slowdown"}], "evidence": {name: path},
"session"}.

examples:
  distdoctor run -- torchrun --nproc-per-node 8 train.py --lr 3e-4
  distdoctor run --stall 60 --json -- python -m torch.distributed.run --nproc-per-node 2 train.py
  distdoctor run --keep-running -- srun python train.py
  distdoctor run --evidence-dir ./incident-42 -- python train.py

exit codes: 0 the job finished, 1 it failed or hung (the verdict says why),
            2 bad usage, or the launch line could not be started
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("run", help=t("run a job's launch line and catch a hang as it happens"),
                            description=t(DESCRIPTION), epilog=t(EPILOG),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep-running", action="store_true",
                        help=t("leave a hung job running for a human after the capture"))
    parser.add_argument("--no-knobs", action="store_true",
                        help=t("start the job with its environment as it is (no evidence switches)"))
    parser.add_argument("--python", metavar="PATH",
                        help=t("the job's interpreter, to read its torch and NCCL versions (default: "
                               "from the launch line)"))
    watch_view.add_watch_options(parser)
    parser.add_argument("job", nargs=argparse.REMAINDER, metavar="-- LAUNCHER ARGS",
                        help=t("the job's launch line, after --"))
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from distdoctor.probes.watch import WatchConfig, plan_launch, watch_job
    from distdoctor.probes.watch.launched import JobTree
    from distdoctor.probes.watch.targets import Launched
    from distdoctor.probes.watch.watcher import default_stall
    from distdoctor.tui.record.session import new_id

    argv = list(args.job)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise UsageError(t("give the job's launch line after --, e.g. distdoctor run -- torchrun "
                           "--nproc-per-node 2 train.py"))
    if not shutil.which(argv[0]):
        raise UsageError(t("cannot start {cmd}: {why}", cmd=argv[0], why=t("not found, or not executable")))
    kb = common.knowledge(args)  # a broken overlay is bad usage now, not after the job
    session_id = new_id()
    shared = watch_view.shared_dir(args, argv, dict(os.environ))
    evidence = watch_view.evidence_dir(args, session_id, shared)
    args.evidence_path = str(evidence)
    plan = plan_launch(argv, os.environ, evidence, knobs=not args.no_knobs, python=args.python)
    env = dict(os.environ, **plan.env_added)
    if plan.fr_dir:
        os.makedirs(plan.fr_dir, exist_ok=True)
    stall = args.stall or default_stall(env)
    watch_view.say(t("watching {launcher} (stall {stall}s), evidence in {dir}", launcher=plan.launcher,
                     stall=f"{stall:g}", dir=evidence))
    for name, value in plan.env_added.items():
        watch_view.say(t("set {line}", line=f"{name}={value}"))
    if plan.why_no_knobs and not args.no_knobs:
        watch_view.say(t("evidence switches left off: {why}", why=plan.why_no_knobs))
    out = sys.stderr if args.json else sys.stdout

    def echo(line: str) -> None:
        print(line, file=out, flush=True)

    log = evidence / "launcher.log"
    try:
        tree = JobTree(plan.argv, env, Path.cwd(), log, on_line=echo, keep=args.keep_running)
    except OSError as exc:
        raise UsageError(t("cannot start {cmd}: {why}", cmd=argv[0], why=exc.strerror or exc)) from None
    config = WatchConfig(stall_s=stall, evidence=evidence, kill_on_hang=not args.keep_running,
                         native=not args.no_native, kb=kb, job_env=env, versions=plan.versions or None,
                         debug_server=watch_view.debug_server(args)[0],
                         debug_server_given=watch_view.debug_server(args)[1], fr_dir=plan.fr_dir,
                         log_sources=[str(log)] + ([plan.log_dir] if plan.log_dir else []), shared=shared)
    try:
        outcome = watch_job(Launched(tree), config)
    except BaseException:
        tree.kill(graceful=True)
        tree.close()
        raise
    if args.keep_running and outcome.outcome == "hang":
        tree.leave()
        watch_view.say(t("the job is left running (--keep-running): process group {pgid}", pgid=tree.sid))
    else:
        tree.kill(graceful=outcome.outcome != "finished")  # whatever the job left behind
        tree.close()
        outcome.survivors = tree.survivors()
        if outcome.survivors:
            outcome.notes.append(t("still running after the end: pids {pids}",
                                   pids=", ".join(map(str, outcome.survivors))))
        port = watch_view.master_port(plan.argv, env)
        if port and not watch_view.port_free(port):
            outcome.notes.append(t("port {port} is still held after the job ended", port=port))
    return watch_view.finish(args, outcome, session_id, KIND)
