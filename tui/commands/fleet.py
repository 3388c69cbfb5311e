"""`distdoctor fleet collect|compare|stacks`: snapshot every node, then find the node that differs;
every node's ranks' stacks in one table."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from distdoctor.knowledge import i18n
from distdoctor.knowledge.i18n import t

from ..errors import UsageError
from .collect import interpreter
from .common import add_common, print_json, record, still_waiting

EPILOG = """\
The node that differs is the usual cause of a job that fails only at scale:
every node must run the same torch, CUDA build, NCCL, driver, GPU model and
count, /dev/shm size and distributed switches.

examples:
  salloc -N 8 distdoctor fleet collect --via srun -o fleet/
  distdoctor fleet collect --via ssh --hostfile hosts.txt -o fleet/ --timeout 60
  distdoctor fleet collect --via pdsh --hosts 'node[01-64]' -o fleet/
  distdoctor fleet compare fleet/
  distdoctor fleet compare fleet/*.json --json
  distdoctor fleet stacks --via srun           where every rank of the hung job is
  distdoctor fleet collect --via kubectl --selector job-name=train -o fleet/

exit codes: collect 0 every host answered, 1 some failed, 2 bad usage;
            compare 0 all agree, 1 outliers found, 2 nothing readable;
            stacks 0 every rank in the same place, 1 odd ranks or failed hosts, 2 none answered.
"""
COLLECT_EPILOG = """\
--via srun   one step, one task per node of the current Slurm allocation
             (--overlap, so it runs beside a hung job's step)
--via ssh    one `ssh -o BatchMode=yes HOST distdoctor collect` per host, at
             most --concurrency at once, each killed after --timeout seconds
--via pdsh   `pdsh -w HOSTS -f N -t T -u TIMEOUT distdoctor collect`, output
             split per host
--via kubectl `kubectl exec POD -- distdoctor collect` in every running pod
             of --selector (PyTorchJob, JobSet...), like ssh
--via local  this node only

Hosts that fail or time out are listed with the reason; the others are kept,
one DIR/<host>.json each. Progress goes to stderr as hosts finish (pdsh and
srun answer for every host at the end: a line every few seconds says they run).

examples:
  salloc -N 8 distdoctor fleet collect --via srun -o fleet/
  distdoctor fleet collect --via ssh --hosts node01,node02,node03 -o fleet/
  distdoctor fleet collect --via pdsh --hostfile hosts.txt -o fleet/ \\
      --concurrency 64
  distdoctor fleet collect --via ssh --hosts 'gpu[1-4]' -o fleet/ \\
      --python /shared/venvs/train/bin/python \\
      --distdoctor /shared/venvs/dd/bin/distdoctor
  distdoctor fleet collect --via kubectl --selector training.kubeflow.org/job-name=bert \\
      --namespace ml --container pytorch -o fleet/

exit codes: 0 every host answered, 1 some hosts failed (the rest are kept),
            2 bad usage (no hosts, tool not on PATH, -o not writable)
"""
COMPARE_EPILOG = """\
Compared: torch, torch's CUDA, the NCCL torch loads, driver, CUDA driver
version, GPU model and count, /dev/shm size and every distributed switch.
Ignored: names, addresses, time. Truncated, foreign, newer-schema and
non-regular files (FIFOs, devices) are listed and left out.

examples:
  distdoctor fleet compare fleet/
  distdoctor fleet compare a.json b.json c.json
  distdoctor fleet compare fleet/ --json --session incident-42

exit codes: 0 every node agrees, 1 outliers found,
            2 no readable snapshot among the paths (or bad usage)
"""
STACKS_EPILOG = """\
Runs `distdoctor stacks --job auto --json` on every node (srun --overlap, ssh,
pdsh, kubectl exec, or this node), then reads all the ranks together: the
groups of identical stacks, the odd ranks out across nodes, and the ranks of
WORLD_SIZE that no node has.

examples:
  salloc ... (or inside the job's allocation):
  distdoctor fleet stacks --via srun
  distdoctor fleet stacks --via ssh --hosts 'node[01-16]' --native
  distdoctor fleet stacks --via kubectl --selector job-name=train --namespace ml
  distdoctor fleet stacks --via pdsh --hostfile hosts.txt --json | jq .odd
  distdoctor fleet stacks --via ssh --hosts 'node[01-04]' --job 10.0.0.1:29500

exit codes: 0 every rank in the same place and every host answered,
            1 odd ranks found or some hosts failed, 2 bad usage or no host answered
"""
MAX_LINES = 20  # outlier lines per field in the text view; --json lists them all
MAX_TIMEOUT_S = 7 * 24 * 3600  # as repro: timers and subprocess timeouts overflow on 1e12 seconds
MAX_CONCURRENCY = 1024  # more ssh at once only runs out of file descriptors and processes


def _positive(kind: type, most: float, unit: str) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(t("not a number: {text}", text=repr(text))) from None
        if not 0 < value < float("inf"):  # nan and inf too: a timeout must end
            raise argparse.ArgumentTypeError(t("must be a number above 0: {text}", text=repr(text)))
        if value > most:
            raise argparse.ArgumentTypeError(t("at most {most}{unit}: {text}", most=most, unit=t(unit),
                                               text=repr(text)))
        return value
    return parse


def register(sub: argparse._SubParsersAction) -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = sub.add_parser("fleet", help=t("snapshot every node and find the odd one out"),
                            description=t("Fan out `distdoctor collect` to every node, then "
                                        "compare the\nsnapshots field by field."),
                            epilog=t(EPILOG), formatter_class=raw)
    # the shared flags go on the actions only: argparse lets a sub-parser's defaults overwrite them
    parser.set_defaults(func=_no_action)
    actions = parser.add_subparsers(dest="fleet_action", metavar="ACTION")
    col = actions.add_parser("collect", help=t("run `distdoctor collect` on every node"),
                             description=t("Run `distdoctor collect` on every node through srun,\n"
                                         "ssh or pdsh and keep one snapshot per node."),
                             epilog=t(COLLECT_EPILOG), formatter_class=raw)
    _reach(col)
    col.add_argument("-o", "--output", metavar="DIR", required=True, help=t("folder for the snapshots"))
    col.add_argument("--python", metavar="PATH", help=t("the job's interpreter on the nodes"))
    add_common(col, session=False)
    col.set_defaults(func=run_collect)
    cmp = actions.add_parser("compare", help=t("find the node that differs"),
                             description=t("Group nodes by the fields that must agree and name "
                                         "the\nmajority value and the outliers of each."),
                             epilog=t(COMPARE_EPILOG), formatter_class=raw)
    cmp.add_argument("paths", nargs="+", metavar="DIR|FILE", help=t("snapshot folders or files"))
    cmp.add_argument("--recorded", action="store_true",
                     help=t("the paths are recorded nodes (extracted sos reports, root trees) or folders of "
                            "them, read as `collect --root` reads one; nothing is written"))
    add_common(cmp)
    cmp.set_defaults(func=run_compare)
    stk = actions.add_parser("stacks", help=t("every node's ranks' stacks in one table"),
                             description=t("Run `distdoctor stacks` on every node and read all the "
                                         "ranks\ntogether: where each is, and the odd ranks out."),
                             epilog=t(STACKS_EPILOG), formatter_class=raw)
    _reach(stk)
    stk.add_argument("--native", action="store_true", help=t("include C/C++ frames (py-spy --native)"))
    stk.add_argument("--job", metavar="ID", help=t("the job on every node when nodes run several: "
                     "its MASTER_ADDR:PORT, rendezvous id or Slurm step (default: auto)"))
    add_common(stk)
    stk.set_defaults(func=run_stacks)


def _reach(parser: argparse.ArgumentParser) -> None:
    """How to reach the nodes: the same flags for collect and stacks."""
    parser.add_argument("--via", required=True, choices=("srun", "ssh", "pdsh", "kubectl", "local"),
                        help=t("how to reach the nodes"))
    hosts = parser.add_mutually_exclusive_group()
    hosts.add_argument("--hosts", metavar="H1,H2", help=t("hosts, ranges allowed: node[01-08],gpu9"))
    hosts.add_argument("--hostfile", metavar="FILE", help=t("one host per line, # comments"))
    parser.add_argument("--selector", metavar="LABEL",
                        help=t("kubectl: the pods' label selector, e.g. job-name=train"))
    parser.add_argument("--namespace", metavar="NS", help=t("kubectl: the pods' namespace"))
    parser.add_argument("--container", metavar="C", help=t("kubectl: the container to exec into"))
    parser.add_argument("--timeout", type=_positive(float, MAX_TIMEOUT_S, " seconds (a week)"),
                        default=60.0, metavar="S",
                        help=t("seconds per host before it is given up (default 60, at most {most})", most=MAX_TIMEOUT_S))
    parser.add_argument("--concurrency", type=_positive(int, MAX_CONCURRENCY, " hosts at once"),
                        default=32, metavar="N",
                        help=t("hosts at once (default 32, at most {most})", most=MAX_CONCURRENCY))
    parser.add_argument("--distdoctor", metavar="CMD", default="distdoctor",
                        help=t("distdoctor on the nodes, if not on their PATH"))


def _no_action(args: argparse.Namespace) -> int:
    raise UsageError(t("fleet needs an action: `distdoctor fleet collect --via ssh --hosts H1,H2 "
                       "-o fleet/` or `distdoctor fleet compare fleet/`"))


# ---- collect ----------------------------------------------------------------------------------

def _hosts(args: argparse.Namespace) -> tuple[str, ...]:
    from distdoctor.probes.fleet import expand_hosts, read_hostfile

    if args.hostfile:
        return tuple(read_hostfile(args.hostfile))
    return tuple(expand_hosts(args.hosts)) if args.hosts else ()


def _options(args: argparse.Namespace, action: str = "collect") -> Any:
    from distdoctor.probes.fleet import FanoutOptions

    hosts = _hosts(args)
    if args.via in ("ssh", "pdsh") and not hosts:
        raise UsageError(t("--via {via} needs hosts: --hosts H1,H2 or --hostfile FILE", via=args.via))
    if args.via in ("local", "kubectl") and hosts:
        what = t("this node only") if args.via == "local" else t("the pods of --selector")
        raise UsageError(t("--via {via} reaches {what}; drop --hosts/--hostfile", via=args.via, what=what))
    kube = [f for f in ("selector", "namespace", "container") if getattr(args, f)]
    if args.via == "kubectl" and not args.selector:
        raise UsageError(t("--via kubectl needs --selector LABEL, e.g. --selector job-name=train"))
    if args.via != "kubectl" and kube:
        raise UsageError(t("--{option} is for --via kubectl", option=kube[0]))
    tool = {"srun": "srun", "ssh": "ssh", "pdsh": "pdsh", "kubectl": "kubectl"}.get(args.via)
    if tool and not shutil.which(tool):
        other = "ssh" if tool != "ssh" else "pdsh"
        raise UsageError(t("{tool}: command not found on PATH; try --via {other}", tool=tool, other=other))
    python = getattr(args, "python", None)
    if args.via == "local" and action == "collect":
        python = interpreter(python)
    extra = ("--native",) if getattr(args, "native", False) else ()
    if getattr(args, "job", None):
        extra += ("--job", args.job)
    return FanoutOptions(via=args.via, hosts=hosts, timeout=args.timeout,
                         concurrency=args.concurrency, python=python, distdoctor=args.distdoctor,
                         action=action, extra=extra, selector=args.selector or "",
                         namespace=args.namespace or "", container=args.container or "")


def _fan_out(opts: Any) -> tuple[list[Any], list[str]]:
    """Run the action on every host the way --via says; the results and the command used."""
    from distdoctor.probes import fleet
    from distdoctor.probes.fleet import fanout

    if opts.via == "ssh":
        return fleet.fan_out_ssh(opts, on_host=_progress), fleet.ssh_argv("HOST", opts)
    if opts.via == "kubectl":
        try:
            results = fanout.fan_out_kubectl(opts, on_host=_progress)
        except fanout.KubectlError as exc:
            raise UsageError(str(exc)) from None
        return results, fanout.kubectl_argv("POD", opts)
    if opts.via == "pdsh":
        waiting = t("still waiting for pdsh on {n} hosts (at most {seconds}s each)", n=len(opts.hosts),
                    seconds=f"{opts.timeout:g}")
        with still_waiting(waiting):
            return fleet.fan_out_pdsh(opts, on_host=_progress), fleet.pdsh_argv(opts)
    if opts.via == "srun":
        try:
            command = fleet.srun_argv(os.environ, opts)
        except fleet.SlurmError as exc:
            raise UsageError(str(exc)) from None
        with still_waiting(t("still waiting for srun (at most {seconds}s per node)",
                             seconds=f"{opts.timeout:g}")):
            return fleet.fan_out_srun(os.environ, opts, on_host=_progress), command
    if opts.action == "stacks":
        return fanout.stacks_local(opts, on_host=_progress), fanout.local_argv(opts)
    return fleet.collect_local(opts, on_host=_progress), []


def _progress(result: Any, done: int, total: int) -> None:
    status = t("ok") if result.ok else t("FAILED: {reason}", reason=result.reason)
    print(t("[{done}/{total}] {host} {status} ({seconds}s)", done=done, total=total, host=result.host,
            status=status, seconds=f"{result.duration_s:.1f}"), file=sys.stderr, flush=True)


def run_collect(args: argparse.Namespace) -> int:
    from distdoctor.probes import fleet

    opts = _options(args)
    out_dir = Path(args.output)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(t("-o {path}: exists and is not a folder", path=out_dir))
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(t("-o {path}: cannot create ({why})", path=out_dir, why=exc.strerror or exc)) from None
    before = {p.name for p in out_dir.glob("*.json")}
    results, command = _fan_out(opts)
    from ..record.redact import redact

    for result in results:  # a node running an older distdoctor sends its snapshot unredacted
        if result.ok and result.doc is not None:
            result.doc = redact(result.doc)
    try:
        fleet.write_results(results, out_dir)
    except OSError as exc:
        raise UsageError(t("-o {path}: cannot write ({why})", path=out_dir, why=exc.strerror or exc)) from None
    stale = sorted(before - {Path(r.file).name for r in results if r.file})
    data = {"via": opts.via, "out_dir": str(out_dir), "command": command,
            "hosts": len(results), "ok": [r.to_dict() for r in results if r.ok],
            "failed": [{"host": r.host, "reason": r.reason} for r in results if not r.ok],
            "stale_files": stale}
    if args.json:
        print_json(data)
    else:
        _print_collect(data)
    return 1 if data["failed"] or not data["ok"] else 0


def _print_collect(data: dict[str, Any]) -> None:
    ok, failed = data["ok"], data["failed"]
    print(t("fleet collect via {via}: {n} of {total} hosts answered, snapshots in {folder}/",
            via=data["via"], n=len(ok), total=data["hosts"], folder=data["out_dir"]))
    if failed:
        print(t("failed:"))
        _host_rows(failed)
    if data["stale_files"]:
        print(t("note: {n} older file(s) in {folder}/ were not replaced this time (e.g. {file}); "
                "compare will read them too", n=len(data["stale_files"]), folder=data["out_dir"],
                file=data["stale_files"][0]))
    if ok:
        print(t("next: {command}", command=f"distdoctor fleet compare {data['out_dir']}/"))


def _host_rows(failed: list[dict[str, Any]]) -> None:
    """`  host  reason` for each host that failed, the hosts in one column (display width)."""
    width = max(i18n.cells(f["host"]) for f in failed)
    for f in failed:
        print(f"  {i18n.pad(f['host'], width)}  {f['reason']}")


# ---- compare ----------------------------------------------------------------------------------

def run_compare(args: argparse.Namespace) -> int:
    from distdoctor.probes.fleet import compare, load_snapshots

    if getattr(args, "recorded", False):
        records, skipped = _recorded(args)
    else:
        records, skipped = load_snapshots(args.paths)
    result = compare(records, skipped)
    if not records:
        if args.json:
            print_json(result)
        for s in skipped:
            print(t("distdoctor: skipped {file}: {reason}", file=s["file"], reason=s["reason"]),
                  file=sys.stderr)
        raise UsageError(t("no readable snapshots in {paths} (make them with `distdoctor fleet "
                           "collect -o DIR`)", paths=" ".join(args.paths)))
    record(args, "fleet", result)
    if args.json:
        print_json(result)
    else:
        from .fleet_text import render_compare

        print(render_compare(result, MAX_LINES))
        for line in may_differ_lines(result):
            print(line)
    return 1 if result["outliers"] else 0


def _recorded(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Snapshots of recorded nodes (sos reports, root trees), made in memory."""
    from distdoctor.probes.recorded import node_trees, snapshot_tree
    from distdoctor.probes.registry import PROBES
    from distdoctor.probes.sosarchive import ArchiveError

    from .common import knowledge

    kb = knowledge(args)
    skipped: list[dict[str, str]] = []
    docs = []
    for tree in node_trees(args.paths, skipped):
        try:
            doc = snapshot_tree(tree, kb, PROBES)
        except ArchiveError as exc:
            skipped.append({"file": str(tree), "reason": str(exc)})
            continue
        doc["file"] = str(tree)
        docs.append(doc)
    return docs, skipped


def may_differ_lines(result: dict[str, Any]) -> list[str]:
    """Fields that differ but may (kernel, glibc, NCCL files on disk): shown, never outliers."""
    from distdoctor.probes.fleet.compare import label, show

    from .logs_text import printable

    lines = []
    for d in result.get("may_differ", []):
        spread = "; ".join(t("{value} on {n}", value=show(d["field"], v["value"]), n=v["count"])
                           for v in d["values"][:4])
        lines.append(printable(t("may differ: {field}: {spread}", field=t(label(d["field"])), spread=spread)))
    return ([""] + lines) if lines else []


# ---- stacks -----------------------------------------------------------------------------------

def run_stacks(args: argparse.Namespace) -> int:
    from distdoctor.probes.stacks import merge_hosts

    from .stacks import render

    opts = _options(args, action="stacks")
    results, command = _fan_out(opts)
    docs = [r.doc for r in results if r.ok and r.doc is not None]
    sizes = {d.get("job", {}).get("world_size") for d in docs}
    world = sizes.pop() if len(sizes) == 1 else None
    merged = merge_hosts(docs, [str(i) for i in range(world)] if isinstance(world, int) else ())
    merged["hosts"] = {"via": opts.via, "command": command,
                       "ok": [r.host for r in results if r.ok],
                       "failed": [{"host": r.host, "reason": r.reason} for r in results if not r.ok]}
    if docs:
        record(args, "stacks", merged)
    if args.json:
        print_json(merged)
    elif docs:
        print(render(merged, t("{n} of {total} hosts via {via}", n=len(docs), total=len(results), via=opts.via)))
    failed = merged["hosts"]["failed"]
    if not docs:  # the progress lines on stderr have said why for each host
        first = t("; {host}: {reason}", host=failed[0]["host"], reason=failed[0]["reason"]) if failed else ""
        raise UsageError(t("fleet stacks: no host answered{first}", first=first))
    if failed and not args.json:
        print("\n" + t("hosts without stacks:"))
        _host_rows(failed)
    return 1 if merged["odd"] or failed else 0
