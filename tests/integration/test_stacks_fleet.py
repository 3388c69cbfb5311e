"""fleet stacks and --via kubectl: stand-in `kubectl` and `ssh` on PATH. Other nodes answer with
stacks documents built from the recorded dumps of a real hang (other nodes are the one thing a
test here may fake); `kubectl exec ... -- distdoctor collect` runs the real collect."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_stacks_analysis import recorded

from distdoctor.probes.fleet.fanout import FanoutOptions, kubectl_argv, kubectl_pods_argv, parse_output
from distdoctor.probes.stacks import analyse

VENV_BIN = Path(sys.executable).parent

# Pods/hosts named hang* hang, fail* fail as kubectl/ssh do, nojob* answer as a node without a
# job; others print $STUB_LOG/<name>.json and exit with the code in <name>.rc (stacks exits 1 when
# it found odd ranks), or run the real command here when there is no such file.
STUB = r'''
import json, os, shlex, subprocess, sys, time
LOG = os.environ["STUB_LOG"]
tool = os.path.basename(sys.argv[0])
args = sys.argv[1:]
with open(os.path.join(LOG, "calls.jsonl"), "a") as fh:
    fh.write(json.dumps([tool] + args) + "\n")
if tool == "kubectl" and args[0] == "get":
    selector = args[args.index("-l") + 1]
    if selector == "broken=1":
        sys.stderr.write("error: You must be logged in to the server (Unauthorized)\n")
        sys.exit(1)
    pods = open(os.path.join(LOG, "pods.txt")).read().split() if selector != "none=1" else []
    print("\n".join("pod/" + p for p in pods))
    sys.exit(0)
if tool == "kubectl":
    rest = args[1:]
    cut = rest.index("--")
    head, command = rest[:cut], rest[cut + 1:]
    positional = [a for i, a in enumerate(head) if not a.startswith("--") and
                  (i == 0 or head[i - 1] not in ("--namespace", "--container"))]
    name = positional[0]
else:
    while args[0] == "-o":
        args = args[2:]
    name, command = args[0], shlex.split(args[1])
if name.startswith("hang"):
    subprocess.Popen(["sleep", "1000"]).wait()
if name.startswith("fail"):
    if tool == "kubectl":
        sys.stderr.write('Error from server (NotFound): pods "%s" not found\n' % name)
        sys.exit(1)
    sys.stderr.write("ssh: connect to host %s port 22: Connection refused\n" % name)
    sys.exit(255)
if name.startswith("nojob"):
    sys.stderr.write("distdoctor: error: no training job found on this node\n")
    if tool == "kubectl":
        sys.stderr.write("command terminated with exit code 2\n")
    sys.exit(2)
doc = os.path.join(LOG, name + ".json")
if os.path.exists(doc):
    sys.stdout.write(open(doc).read())
    sys.exit(int(open(os.path.join(LOG, name + ".rc")).read()))
proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
sys.stdout.write(proc.stdout)
sys.stderr.write(proc.stderr)
sys.exit(proc.returncode)
'''


@pytest.fixture()
def stubs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir, log = tmp_path / "bin", tmp_path / "log"
    bin_dir.mkdir()
    log.mkdir()
    for name in ("kubectl", "ssh"):
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\n{STUB}")
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{VENV_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STUB_LOG", str(log))
    return log


def node(log: Path, name: str, kind: str, ranks: range, world: int = 3) -> None:
    """What `distdoctor stacks --job auto --json` prints on node `name` holding `ranks`."""
    doc = analyse(recorded(kind, name, ranks))
    doc["job"] = {"found": "torchrun agent 1", "world_size": world}
    (log / f"{name}.json").write_text(json.dumps(doc))
    (log / f"{name}.rc").write_text("1" if doc["odd"] else "0")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "distdoctor"), *args], capture_output=True, text=True,
                          timeout=120, env=os.environ.copy())


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in (log / "calls.jsonl").read_text().splitlines()]


def test_kubectl_stacks_merges_pods_and_names_the_odd_rank(stubs: Path) -> None:
    (stubs / "pods.txt").write_text("trainer-0 trainer-1 hang-2 fail-3 nojob-4")
    node(stubs, "trainer-0", "sleep", range(0, 1))
    node(stubs, "trainer-1", "sleep", range(1, 3))  # this node's own view: 1 vs 1
    proc = run_cli("fleet", "stacks", "--via", "kubectl", "--selector", "job-name=train",
                   "--namespace", "ml", "--container", "pytorch", "--timeout", "5", "--json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert [(r["rank"], r["host"]) for r in doc["ranks"]] == [
        ("0", "trainer-0"), ("1", "trainer-1"), ("2", "trainer-1")]
    assert [(o["rank"], o["where"]) for o in doc["odd"]] == [("1", "slow_step (train.py:10)")]
    assert doc["culprit"]["ranks"] == ["1"]
    assert doc["summary"] == "2 ranks in all_reduce (train.py:38); rank 1 in slow_step (train.py:10)"
    assert doc["hosts"]["ok"] == ["trainer-0", "trainer-1"]
    failed = {f["host"]: f["reason"] for f in doc["hosts"]["failed"]}
    assert failed["hang-2"] == "kubectl: timed out after 5s"
    assert 'pods "fail-3" not found' in failed["fail-3"]
    assert failed["nojob-4"] == "exit code 2: distdoctor: error: no training job found on this node"
    execs = [c for c in calls(stubs) if c[1] == "exec"]
    assert ["kubectl", "exec", "--namespace", "ml", "trainer-0", "--container", "pytorch", "--",
            "distdoctor", "stacks", "--job", "auto", "--json"] in execs
    get = next(c for c in calls(stubs) if c[1] == "get")
    assert get[:6] == ["kubectl", "get", "pods", "--namespace", "ml", "-l"]


def test_ssh_stacks_finds_a_rank_no_node_has(stubs: Path) -> None:
    node(stubs, "n1", "collective", range(0, 1))
    node(stubs, "n2", "collective", range(2, 3))  # rank 1's node never started it
    proc = run_cli("fleet", "stacks", "--via", "ssh", "--hosts", "n1,n2", "--native",
                   "--job", "10.0.0.1:29500")
    assert proc.returncode == 1, proc.stderr
    assert "stacks: 2 ranks in all_reduce (train.py:34); rank 1 not running" in proc.stdout
    assert "culprit (missing): rank 1 is not running while the others wait" in proc.stdout
    assert "n1" in proc.stdout and "n2" in proc.stdout  # one table, a host column
    ssh = [c for c in calls(stubs) if c[0] == "ssh"]
    assert ssh[0][-1] == "distdoctor stacks --json --native --job 10.0.0.1:29500"


def test_all_in_one_place_is_exit_0(stubs: Path) -> None:
    node(stubs, "n1", "collective", range(0, 1), world=2)
    node(stubs, "n2", "collective", range(2, 3), world=2)
    doc = json.loads((stubs / "n2.json").read_text())
    doc["ranks"][0]["rank"] = "1"
    (stubs / "n2.json").write_text(json.dumps(doc))
    proc = run_cli("fleet", "stacks", "--via", "ssh", "--hosts", "n1,n2", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["odd"] == []


def test_kubectl_collect_runs_the_real_collect_in_each_pod(stubs: Path, tmp_path: Path) -> None:
    (stubs / "pods.txt").write_text("worker-0 fail-1")
    out = tmp_path / "fleet"
    proc = run_cli("fleet", "collect", "--via", "kubectl", "--selector", "app=bert", "-o", str(out),
                   "--timeout", "60", "--json")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert [r["host"] for r in data["ok"]] == ["worker-0"]
    assert data["command"] == ["kubectl", "exec", "POD", "--", "distdoctor", "collect"]
    snapshot = json.loads((out / "worker-0.json").read_text())
    assert parse_output(json.dumps(snapshot))[0] is not None
    assert [f["host"] for f in data["failed"]] == ["fail-1"]


@pytest.mark.parametrize("args, message", [
    (["--selector", "none=1"], "no running pod matches -l none=1"),
    (["--selector", "broken=1"], "Unauthorized"),
    ([], "--via kubectl needs --selector LABEL"),
    (["--selector", "a=b", "--hosts", "x"], "drop --hosts/--hostfile"),
])
def test_kubectl_bad_usage_is_one_line(stubs: Path, args: list[str], message: str) -> None:
    proc = run_cli("fleet", "stacks", "--via", "kubectl", *args)
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


def test_kubectl_command_lines() -> None:
    opts = FanoutOptions(via="kubectl", selector="job-name=t", namespace="ml", container="c",
                         timeout=30, action="stacks", extra=("--native",))
    assert kubectl_argv("p0", opts) == ["kubectl", "exec", "--namespace", "ml", "p0", "--container",
                                        "c", "--", "distdoctor", "stacks", "--job", "auto",
                                        "--json", "--native"]
    assert kubectl_pods_argv(opts) == ["kubectl", "get", "pods", "--namespace", "ml", "-l",
                                       "job-name=t", "--field-selector=status.phase=Running",
                                       "-o", "name", "--request-timeout=10s"]


def test_srun_and_pdsh_run_stacks_on_every_node() -> None:
    from distdoctor.probes.fleet import pdsh_argv, srun_argv

    opts = FanoutOptions(via="srun", timeout=30, action="stacks")
    argv = srun_argv({"SLURM_JOB_ID": "5", "SLURM_NNODES": "4"}, opts)
    assert "--overlap" in argv and argv[-5:] == ["distdoctor", "stacks", "--job", "auto", "--json"]
    opts = FanoutOptions(via="pdsh", hosts=("a", "b"), timeout=30, action="stacks")
    assert pdsh_argv(opts)[-1] == "distdoctor stacks --job auto --json"


def test_a_stacks_document_is_an_answer_not_a_bad_snapshot() -> None:
    doc = analyse(recorded("sleep"))
    assert parse_output("banner\n" + json.dumps(doc)) == (doc, "")
