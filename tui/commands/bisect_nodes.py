"""`distdoctor bisect --nodes`: which node (or node's network) makes the multi-node job fail."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from distdoctor.knowledge.i18n import t

from ..errors import UsageError
from .common import print_json, record
from .exitcodes import problem_if

VERDICTS = {
    "baseline-passes": "the job passes on every node together: nothing to isolate",
    "node": "fails by itself: {suspects}",
    "network": "passes alone but fails with the others: the network or link of {suspects}",
    "inconclusive": "every node and every pair passes, all together fail: the fault needs more nodes at once",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", metavar="HOSTS",
                        help=t("find the failing node instead of a switch: node[01-04] or name=addr,...; "
                               "one process per node"))
    parser.add_argument("--launch", default="ssh", metavar="PREFIX",
                        help=t("how a process starts on a node: ssh (default), srun, or a prefix with "
                               "{host} (and {command} where it takes one string), e.g. 'ip netns exec {host}'"))
    parser.add_argument("--master-port", type=int, default=29531, metavar="PORT",
                        help=t("first port for the runs' rendezvous; each run takes the next (default 29531)"))


def run_nodes(args: argparse.Namespace) -> int:
    from distdoctor.probes.fleet.hosts import expand_hosts
    from distdoctor.probes.repro import parse_env
    from distdoctor.probes.repro.nodes import isolate, parse_nodes, run_subset
    from distdoctor.probes.runner import SubprocessRunner

    nodes = parse_nodes(args.nodes, expand_hosts)
    env = parse_env(args.env)
    if not (0 < args.timeout <= 3600):
        raise UsageError(t("--timeout must be above 0 and at most {most} seconds with --nodes", most=3600))
    if not (1024 <= args.master_port <= 65535 - 4 * len(nodes)):
        raise UsageError(t("--master-port {port}: not a usable port", port=args.master_port))
    python = args.python or "python3"
    backend = "auto" if args.backend == "auto" else args.backend
    runner = SubprocessRunner()
    ports = iter(range(args.master_port, 65536))

    def run(subset: Any) -> Any:
        return run_subset(subset, runner=runner, python=python, launch=args.launch, port=next(ports),
                          timeout=args.timeout, env=env, backend=backend)

    def progress(item: Any) -> None:
        if not args.json:
            word = t("passed") if item.passed else t("FAILED")
            print(t("  {word:<7} {nodes}  ({why}, {seconds:.0f} s)", word=word, nodes=", ".join(item.nodes),
                    why=item.why, seconds=item.duration_s),
                  file=sys.stderr, flush=True)

    result = isolate(nodes, run, on_run=progress)
    data = result.to_dict()
    data["verdict_text"] = t(VERDICTS[result.verdict], suspects=", ".join(result.suspects))
    # its own kind: the switch bisection's readers (report, conclusion) expect a switch verdict
    record(args, "bisect-nodes", data)
    if args.json:
        print_json(data)
    else:
        print(t("bisect --nodes over {n} nodes: {verdict}", n=len(nodes), verdict=data["verdict_text"]))
        for suspect in result.suspects:
            print(t("  next: distdoctor check on {node}; if it is the hardware, drain it:", node=suspect))
            print(f"    ssh {suspect} distdoctor check --only kernel gpu_health pcie infiniband")
            print(f"    scontrol update nodename={suspect} state=drain reason=\"distdoctor bisect --nodes\"")
    return problem_if(not result.to_dict()["baseline_passed"])
