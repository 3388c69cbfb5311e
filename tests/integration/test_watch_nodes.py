"""`distdoctor run` on two nodes (issue 22 item 7): two network namespaces, each with its own host
name, stand for two nodes; a real 2-node torchrun Gloo job (one rank per node, the master in the
first namespace, reached over the veth), and on each node `distdoctor run --evidence-dir` on one
shared folder. Rank 1, on the second node, sleeps before an all_reduce. Both watchers capture,
the verdict over both nodes' stacks names rank 1 and the second node's host, once (the node of
the lowest node rank gives it), both exit 1, and nothing is left running, no port held.
About 25 s on a loaded 2-core machine, most of it torchrun and its workers importing torch.
Skipped, with the reason, where namespaces or a host name per node cannot be had (not root, no
`ip`, no `unshare`)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import test_bisect_nodes

pytestmark = pytest.mark.slow

namespaces = test_bisect_nodes.namespaces  # the namespaces-as-nodes fixture (a bridge, a veth each)

STALL = "4"
JOB = r'''
import datetime, sys, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
rank = dist.get_rank()
t = torch.ones(4)
dist.all_reduce(t)
if rank == 1:
    time.sleep(300)                            # the hang: rank 1, on the second node
dist.all_reduce(t)
print(f"rank {rank} done", flush=True)
'''
PORT = 29531  # inside fresh namespaces every port is free


def _own_hostnames() -> str:
    """Why each node cannot get its own host name here ("" when it can)."""
    if not shutil.which("unshare"):
        return "needs unshare (util-linux) for a host name per node"
    done = subprocess.run(["unshare", "--uts", "hostname", "ddprobe"], capture_output=True, text=True, timeout=30)
    return f"unshare --uts: {done.stderr.strip()}" if done.returncode else ""


def _node(ns: str, host: str, node_rank: int, master: str, shared: Path) -> list[str]:
    """One node's watcher: in the namespace, under its own host name (a UTS namespace)."""
    return ["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host,
            # --no-native: the native stacks are not what is tested here, and take seconds
            sys.executable, "-m", "distdoctor.tui.cli", "run", "--stall", STALL, "--json", "--no-native",
            "--evidence-dir", str(shared), "--",
            sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node-rank={node_rank}",
            "--nproc-per-node=1", f"--master-addr={master}", f"--master-port={PORT}", "train.py"]


def _port_free_in(ns: str) -> bool:
    check = ("import sys; from distdoctor.probes.repro.proctree import port_is_free; "
             f"sys.exit(0 if port_is_free({PORT}, '0.0.0.0') else 1)")
    return subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", check], timeout=30).returncode == 0


def test_two_nodes_agree_and_the_verdict_names_the_rank_on_the_other_node(namespaces: list[str],
                                                                          tmp_path: Path) -> None:
    why = _own_hostnames()
    if why:
        pytest.skip(why)
    (ns_a, ip_a), (ns_b, _) = (n.split("=") for n in namespaces[:2])
    (tmp_path / "train.py").write_text(JOB)
    shared = tmp_path / "shared"
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="dd0")
    procs = [subprocess.Popen(_node(ns, host, i, ip_a, shared), cwd=tmp_path, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
             for i, (ns, host) in enumerate(((ns_a, "ddnode-a"), (ns_b, "ddnode-b")))]
    try:
        outs = [p.communicate(timeout=150) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
    if any("ptrace refused" in err for _, err in outs):
        pytest.skip("this machine forbids attaching to processes (py-spy)")
    results = []
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 1 and out.strip(), err[-3000:]
        results.append(json.loads(out))
    for res in results:
        assert res["outcome"] == "hang" and res["hang"]["detected_after_s"] >= float(STALL), res
        culprit = res["verdict"]["culprit"]
        assert (culprit["ranks"], culprit["host"]) == (["1"], "ddnode-b"), res["verdict"]
        assert res["verdict"]["given_by"] == "ddnode-a"  # the lowest node rank gives the one verdict
        assert res["verdict"]["nodes"] == ["ddnode-a", "ddnode-b"]
    verdict = json.loads((shared / "verdict.json").read_text())
    assert verdict["by"] == "ddnode-a" and verdict["verdict"]["culprit"]["host"] == "ddnode-b"
    assert verdict["missing"] == []
    assert sorted(p.name for p in shared.iterdir()) == ["ddnode-a", "ddnode-b", "verdict.json"]  # one, no leftovers
    for host in ("ddnode-a", "ddnode-b"):
        assert (shared / host / "captured.json").is_file() and (shared / host / "stacks.json").is_file()
    merged = json.loads(Path(results[0]["evidence"]["stacks_all_nodes"]).read_text())
    where = {r["rank"]: (r["host"], r["where"]) for r in merged["ranks"]}
    assert where["0"][0] == "ddnode-a" and where["0"][1].startswith("all_reduce (train.py:")
    assert where["1"][0] == "ddnode-b" and where["1"][1].startswith("<module> (train.py:")
    left = []
    for q in psutil.process_iter(["cmdline", "cwd", "status"]):
        if q.info["status"] != psutil.STATUS_ZOMBIE and q.info["cwd"] == str(tmp_path) \
                and "train.py" in " ".join(q.info["cmdline"] or []):
            left.append(q.pid)
    assert not left
    assert _port_free_in(ns_a)
