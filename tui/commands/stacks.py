"""`distdoctor stacks`: where every rank of a hung job is right now, and the odd ranks out."""
from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from distdoctor.knowledge.i18n import t

from ..errors import UsageError
from .common import add_common, print_json, record

DESCRIPTION = """\
Dump every local rank of a running job with py-spy (each paused for
milliseconds, in parallel, under a timeout) and say where each one is: which
collective (all_reduce, broadcast, barrier...), the dataloader, a checkpoint,
eval, or plain Python at file:line. Identical stacks are grouped and the odd
ranks out are named."""
EPILOG = """\
Finding the ranks: the children of a torchrun / torch.distributed.launch
agent, processes with RANK or LOCAL_RANK in /proc/PID/environ, and a Slurm
step's tasks. `--job auto` (the default) takes the one job on this node and
lists the candidates when there are several. Inside a Slurm job (as under
`srun --overlap`), only that job's processes are considered.

--json prints {"ranks": [{"rank", "pid", "host", "where", "frames"}],
"groups": [{"ranks", "where", "frames"}], "odd": [{"rank", "where", "why"}],
"culprit", "summary", "job"}; frames are innermost first, as py-spy prints them.

examples:
  distdoctor stacks                          the one job on this node
  distdoctor stacks --job 4242               one of the jobs `--job auto` listed
  distdoctor stacks --job 10.0.0.1:29500     the job whose MASTER_ADDR:PORT is this
  distdoctor stacks --pid 4242 4243 --native with C/C++ frames (NCCL, Gloo)
  distdoctor stacks --json | jq '.odd'
  distdoctor fleet stacks --via srun         every node of this Slurm allocation

exit codes: 0 every rank is in the same place, 1 odd ranks found (or a rank
            could not be dumped), 2 bad usage, no job found, or no rank could be dumped
"""
MAX_FRAMES = 8  # Python frames per group in the text view; --json has them all


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("stacks", help=t("where every rank of a hung job is (py-spy)"),
                            description=t(DESCRIPTION), epilog=t(EPILOG),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_job_choice(parser)
    parser.add_argument("--native", action="store_true",
                        help=t("include C/C++ frames (py-spy --native)"))
    parser.add_argument("--timeout", type=_seconds, default=None, metavar="S",
                        help=t("seconds per rank's dump (default 20)"))
    parser.add_argument("--debug-server", metavar="URL",
                        help=t("read every rank's stacks from the job's PyTorch debug server "
                               "(start_debug_server, http://HOST:25999) instead of py-spy: no ptrace needed"))
    add_common(parser)
    parser.set_defaults(func=run)


def add_job_choice(parser: argparse.ArgumentParser) -> None:
    """--pid PID... or --job auto|ID: which job's ranks (stacks and watch take the same)."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--pid", type=_pid, nargs="+", action="extend", metavar="PID",
                       help=t("the ranks' process ids"))
    which.add_argument("--job", default="auto", metavar="auto|ID",
                       help=t("`auto` (default): the one job on this node; or an ID it listed "
                              "(MASTER_ADDR:PORT names a job on every node)"))


def _pid(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(t("not a process id: {text}", text=repr(text)))
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(t("not a number: {text}", text=repr(text))) from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(t("must be above 0 and at most 3600: {text}", text=repr(text)))
    return value


NO_JOB = ("no training job found on this node (no torchrun/launch children, no process with "
          "RANK or LOCAL_RANK in its environment, no Slurm step task); give the ranks: "
          "`distdoctor stacks --pid PID ...`")


def _pick(args: argparse.Namespace) -> tuple[list[Any], list[str], str]:
    """The ranks to dump, the ranks expected to exist, and how they were found."""
    from distdoctor.probes import stacks

    if args.pid:
        return stacks.ranks_for_pids(args.pid), [], "--pid"
    jobs = stacks.find_jobs()
    if args.job != "auto":
        chosen = [j for j in jobs if j.matches(args.job)]
        if not chosen:
            known = ", ".join(j.id for j in jobs) or t("none found")
            raise UsageError(t("--job {job}: no such job on this node (jobs: {known})", job=args.job, known=known))
        if len(chosen) > 1:
            ids = ", ".join(j.id for j in chosen)
            raise UsageError(t("--job {job} names {n} jobs here ({ids}); pick one by its id", job=args.job,
                               n=len(chosen), ids=ids))
        job = chosen[0]
    elif not jobs:
        raise UsageError(t(NO_JOB))
    elif len(jobs) > 1:
        for j in jobs:
            print(f"  {j.describe()}", file=sys.stderr)
        ids = ", ".join(j.id for j in jobs)
        raise UsageError(t("{n} jobs on this node ({ids}), pick one with --job ID (listed above)",
                           n=len(jobs), ids=ids))
    else:
        job = jobs[0]
    return job.ranks, job.expected(), job.describe()


def run(args: argparse.Namespace) -> int:
    from distdoctor.probes import stacks

    if args.debug_server:
        result, found = _from_debug_server(args)
    else:
        ranks, expected, found = _pick(args)
        try:
            stacks.find_pyspy()
        except stacks.NoPySpy as exc:
            raise UsageError(str(exc)) from None
        timeout = args.timeout or stacks.DUMP_TIMEOUT_S
        result = stacks.take(ranks, expected=expected, native=args.native, timeout=timeout)
        sizes = {r.world_size for r in ranks}
        # for `fleet stacks`: the ranks no node has are found from the job's WORLD_SIZE
        result["job"] = {"found": found, "world_size": sizes.pop() if len(sizes) == 1 else None}
    dumped = [r for r in result["ranks"] if r["frames"]]
    record(args, "stacks", result)
    if args.json:
        print_json(result)
    elif dumped:
        print(render(result, found, native=args.native))
    if not dumped:
        first = next((r["where"] for r in result["ranks"]), "no rank")
        raise UsageError(t("could not dump any rank: {why}", why=first.removeprefix("not dumped: ")))
    # a rank that could not be dumped may be the one holding the job: not "all in one place"
    return 1 if result["odd"] or len(dumped) < len(result["ranks"]) else 0


def _from_debug_server(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """Every rank's stacks from torch's debug server (its ranks are all of the job's)."""
    from distdoctor.probes import debugserver, stacks

    try:
        ranks = debugserver.stacks(args.debug_server, timeout=args.timeout or debugserver.TIMEOUT_S)
    except debugserver.DebugServerError as exc:
        raise UsageError(str(exc)) from None
    result = stacks.analyse(ranks)
    found = t("debug server {url}", url=args.debug_server)
    result["job"] = {"found": found, "world_size": len(ranks)}
    return result, found


def _frame_line(frame: dict[str, Any]) -> str:
    line = f":{frame['line']}" if frame.get("line") else ""
    # torch/distributed/distributed_c10d.py, not /venv/lib/python3.11/site-packages/torch/...
    file = re.split(r"/(?:site|dist)-packages/", str(frame["file"]))[-1]
    return f"{frame['name']} ({file}{line})"


def _where(where: str) -> str:
    """A rank's place; "not dumped: why" (the data's marker) in the output's language."""
    head, sep, why = where.partition("not dumped: ")
    return t("not dumped: {why}", why=why) if sep and not head else where


def _ranks(ranks: list[str]) -> str:
    from distdoctor.probes.stacks import rank_list

    return t("rank {rank}", rank=ranks[0]) if len(ranks) == 1 else \
        t("{n} ranks ({ranks})", n=len(ranks), ranks=rank_list(ranks))


def summary(result: dict[str, Any]) -> str:
    """The result's one-line summary in the output's language: the English one as the probe
    wrote it, or the same parts (the job's place first, then the others, the ranks not running,
    those not dumped) rebuilt from the ranks and the odd ones out."""
    from distdoctor.knowledge import i18n
    from distdoctor.probes.stacks.analyse import NOT_RUNNING, rank_key

    if i18n.resolve() == "en":
        return result["summary"]
    by_where: dict[str, list[str]] = {}
    failed = []
    for r in result["ranks"]:
        if r["where"].startswith("not dumped"):
            failed.append(r["rank"])
        else:
            by_where.setdefault(r["where"], []).append(r["rank"])
    odd = {o["rank"] for o in result["odd"]}
    missing = [o["rank"] for o in result["odd"] if o["where"] == NOT_RUNNING]
    ref = next((w for w, members in by_where.items() if not odd & set(members)), "")
    order = sorted(by_where, key=lambda w: (w != ref, -len(by_where[w]),
                                            rank_key(sorted(by_where[w], key=rank_key)[0])))
    parts = []
    for where in order:
        members = sorted(by_where[where], key=rank_key)
        who = t("rank {rank}", rank=members[0]) if len(members) == 1 else t("{n} ranks", n=len(members))
        parts.append(t("{who} in {where}", who=who, where=where))
    if missing:
        parts.append(t("{who} not running", who=_ranks(missing)))
    if failed:
        parts.append(t("{who} not dumped", who=_ranks(sorted(failed, key=rank_key))))
    return t("; ").join(parts) if parts else t("no rank dumped")


def render(result: dict[str, Any], found: str = "", native: bool = False) -> str:
    """The text view: summary, one line per rank, each group's frames (with `native`, the C/C++
    ones too, as --native asked), the odd ranks, next steps."""
    from distdoctor.probes.stacks import rank_list
    from distdoctor.probes.stacks.frames import python_frames

    lines = [t("stacks: {summary}", summary=summary(result))]
    if found:
        lines.append(f"  ({found})")
    ranks = result["ranks"]
    if ranks:
        width = max(len(r["rank"]) for r in ranks)
        hosts = len({r["host"] for r in ranks}) > 1
        lines.append("")
        for r in ranks:
            where = f"{r['host']}  " if hosts else ""
            lines.append(f"  rank {r['rank']:<{width}}  pid {r['pid']!s:<8} {where}{_where(r['where'])}")
    for group in result["groups"]:
        lines.append("")
        label = "rank" if len(group["ranks"]) == 1 else "ranks"
        lines.append(f"{label} {rank_list(group['ranks'])}{t(': ')}{group['where']}")
        frames = group["frames"] if native else (python_frames(group["frames"]) or group["frames"])
        for frame in frames[:MAX_FRAMES * (3 if native else 1)]:
            lines.append(f"    {_frame_line(frame)}")
        shown = MAX_FRAMES * (3 if native else 1)
        if len(frames) > shown:
            lines.append("    " + t("... {n} more (--json has them all)", n=len(frames) - shown))
    if result["odd"]:
        lines.append("")
        lines.append(t("odd ranks out:"))
        for odd in result["odd"]:
            lines.append(f"  rank {odd['rank']} {odd['why']}")
    culprit = result.get("culprit")
    if culprit:
        lines.append("")
        lines.append(t("culprit ({role}): {why}", role=t(culprit["role"]), why=culprit["why"]))
    lines.extend(_next_steps(result))
    return "\n".join(lines)


def _next_steps(result: dict[str, Any]) -> list[str]:
    odd = [o for o in result["odd"] if not o["where"].startswith(("not running", "not dumped"))]
    by_rank = {r["rank"]: r for r in result["ranks"]}
    steps = []
    if odd:
        rank = by_rank[odd[0]["rank"]]
        pid = rank["pid"]
        # across nodes, the pid means something only on its host
        on = t(" (on {host})", host=rank["host"]) if len({r["host"] for r in result["ranks"]}) > 1 else ""
        steps.append(f"  py-spy dump --pid {pid} --locals      " + t("the odd rank, with its variables") + on)
        steps.append(f"  distdoctor stacks --pid {pid} --native   " + t("its C/C++ frames too") + on)
    if any(r["frames"] for r in result["ranks"]):
        steps.append("  distdoctor stacks --json > stacks.json    " + t("keep this for the incident"))
    return ["", t("next:")] + steps if steps else []
