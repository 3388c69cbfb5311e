"""`bisect --nodes`: find the node (or the node's network) that makes a multi-node job fail,
one change at a time. The same minimal job (init, all-reduce checked, barrier) runs on a subset
of the nodes, one process per node, started through a launch prefix (ssh, srun, or
`ip netns exec` in the tests); every run differs from one that passed by one node only.

Order: the baseline (every node); each node alone (a node that fails by itself is the culprit);
then a reference node that passed paired with each other node (a pair that fails while both
passed alone points at that node's network or link)."""
from __future__ import annotations

import re
import shlex
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from distdoctor.knowledge.errors import InputError

from ..runner import CommandResult, Runner

LAUNCH_PRESETS = {"ssh": "ssh -o BatchMode=yes {host} {command}",
                  "srun": "srun --nodes=1 --ntasks=1 --overlap -w {host}"}
MAX_NODES = 64
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,253}$")  # a host, an address, a namespace
SCRIPT = r"""
import datetime, os, sys
import torch, torch.distributed as dist
env = os.environ
backend = env.get("DD_BACKEND", "gloo")
if backend == "auto":
    backend = "nccl" if torch.cuda.is_available() else "gloo"
rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
print(f"distdoctor-node rank {rank}/{world} on {env.get('DD_NODE')} backend {backend}", flush=True)
dist.init_process_group(backend, init_method=f"tcp://{env['MASTER_ADDR']}:{env['MASTER_PORT']}",
                        rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=float(env.get("DD_TIMEOUT", "30"))))
device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
x = torch.ones(1 << 18, device=device)
dist.all_reduce(x)
ok = x[0].item() == world
dist.barrier()
dist.destroy_process_group()
print(f"distdoctor-node rank {rank} {'ok' if ok else 'WRONG SUM'}", flush=True)
sys.exit(0 if ok else 3)
"""


class NodesInputError(InputError, ValueError):
    """--nodes or --launch cannot be used; the message is one line."""


@dataclass(frozen=True)
class Node:
    name: str
    addr: str  # what the others connect to when this node is rank 0


def parse_nodes(text: str, expand: Callable[[str], list[str]]) -> list[Node]:
    """"node[01-03]" or "ns1=10.0.0.1,ns2=10.0.0.2": names (Slurm ranges allowed), each with an
    optional address."""
    nodes: list[Node] = []
    # name=addr pairs are listed one by one; bare names may use Slurm ranges
    items = [i.strip() for i in text.split(",")] if "=" in text else expand(text)
    for item in items:
        name, _, addr = item.partition("=")
        if not _NAME.match(name) or (addr and not _NAME.match(addr)):
            raise NodesInputError(f"--nodes: {item!r} is not NAME or NAME=ADDRESS")
        if any(n.name == name for n in nodes):
            raise NodesInputError(f"--nodes: {item!r} is empty or named twice")
        nodes.append(Node(name, addr or name))
    if len(nodes) < 2:
        raise NodesInputError("--nodes: give at least two nodes (one alone has nobody to disagree with)")
    if len(nodes) > MAX_NODES:
        raise NodesInputError(f"--nodes: {len(nodes)} nodes, at most {MAX_NODES}")
    return nodes


def launch_argv(template: str, host: str, argv: Sequence[str]) -> list[str]:
    """The launch prefix for one host, then the command: appended as words, or as one shell
    string where the template says {command} (ssh hands its remote side a string)."""
    parts = shlex.split(LAUNCH_PRESETS.get(template, template))
    if not parts:
        raise NodesInputError("--launch: empty")
    out: list[str] = []
    for part in parts:
        if part == "{command}":
            out.append(shlex.join(argv))
        else:
            out.append(part.replace("{host}", host))
    if "{command}" not in parts:
        out += list(argv)
    return out


@dataclass(frozen=True)
class SubsetRun:
    nodes: tuple[str, ...]
    why: str
    passed: bool
    duration_s: float
    ranks: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": list(self.nodes), "why": self.why, "passed": self.passed,
                "duration_s": round(self.duration_s, 2), "ranks": [dict(r) for r in self.ranks]}


def run_subset(nodes: Sequence[Node], *, runner: Runner, python: str, launch: str, port: int,
               timeout: float, env: Mapping[str, str], backend: str = "gloo") -> tuple[bool, list[dict[str, Any]]]:
    """One process per node, all at once; passed when every one exits 0 in time."""
    results: list[CommandResult | None] = [None] * len(nodes)
    master = nodes[0].addr

    def start(i: int, node: Node) -> None:
        job_env = {**env, "MASTER_ADDR": master, "MASTER_PORT": str(port), "RANK": str(i),
                   "WORLD_SIZE": str(len(nodes)), "DD_BACKEND": backend, "DD_TIMEOUT": f"{timeout:g}",
                   "DD_NODE": node.name}
        argv = ["env", *(f"{k}={v}" for k, v in job_env.items()), python, "-c", SCRIPT]
        # the job's own timeout fires first; the margin covers importing torch
        results[i] = runner(launch_argv(launch, node.name, argv), timeout=timeout + 60)

    threads = [threading.Thread(target=start, args=(i, n), daemon=True) for i, n in enumerate(nodes)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    ranks = []
    for node, res in zip(nodes, results):
        assert res is not None
        tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
        ranks.append({"node": node.name, "exit": res.returncode, "error": res.error, "tail": tail})
    return all(r is not None and r.ok for r in results), ranks


@dataclass
class NodeBisect:
    nodes: list[str]
    runs: list[SubsetRun] = field(default_factory=list)
    verdict: str = ""  # baseline-passes | node | network | inconclusive
    suspects: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "verdict": self.verdict, "suspects": self.suspects,
                "runs": [r.to_dict() for r in self.runs],
                "baseline_passed": bool(self.runs and self.runs[0].passed)}


def isolate(nodes: Sequence[Node], run: Callable[[Sequence[Node]], tuple[bool, list[dict[str, Any]]]],
            on_run: Callable[[SubsetRun], None] | None = None) -> NodeBisect:
    """The search itself, over any `run(subset) -> (passed, ranks)`."""
    out = NodeBisect([n.name for n in nodes])

    def trial(subset: Sequence[Node], why: str) -> bool:
        start = time.monotonic()
        passed, ranks = run(subset)
        item = SubsetRun(tuple(n.name for n in subset), why, passed, time.monotonic() - start, tuple(ranks))
        out.runs.append(item)
        if on_run:
            on_run(item)
        return passed

    if trial(nodes, "baseline: every node"):
        out.verdict = "baseline-passes"
        return out
    alone = [n for n in nodes if not trial([n], "alone: this node by itself")]
    if alone:
        out.verdict, out.suspects = "node", [n.name for n in alone]
        return out
    ref, others = nodes[0], list(nodes[1:])
    failing = [n for n in others if not trial([ref, n], f"with {ref.name}, which passed alone")]
    if failing and len(failing) == len(others) and len(others) >= 2:
        # every pair with the reference fails: the reference is the common factor, if two others agree
        if trial([others[0], others[1]], f"without {ref.name}"):
            out.verdict, out.suspects = "network", [ref.name]
            return out
    if failing:
        out.verdict, out.suspects = "network", [n.name for n in failing]
    else:
        out.verdict = "inconclusive"  # every pair passes, the whole set fails: it needs more nodes
    return out
