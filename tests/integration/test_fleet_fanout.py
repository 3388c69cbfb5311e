"""fleet collect: stand-in ssh/pdsh run the real `distdoctor collect`; one host hangs, one fails."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from distdoctor.probes.fleet import (
    FanoutOptions,
    SlurmError,
    fan_out_srun,
    pdsh_argv,
    split_pdsh,
    srun_argv,
    ssh_argv,
    validate_snapshot,
)
from distdoctor.probes.runner import CommandResult

VENV_BIN = Path(sys.executable).parent
TIMEOUT = 10  # per host: the hanging host is given up after this; a real collect takes
# about 0.8 s alone and a few seconds on a loaded 2-core runner, so the good hosts never reach it

# Common to both stand-ins: a host named hang* hangs (a child `sleep` in the same process
# group, so only a group kill ends it), fail* fails the way ssh does, the rest run the real
# command here. Start and end times go to $STUB_LOG/<host>.times; for a killed host the end is
# written by a watcher outside the group that waits on the stub's pidfd (an event, no polling).
STUB_COMMON = r'''
import json, os, select, shlex, subprocess, sys, time
LOG = os.environ["STUB_LOG"]

def mark(host, what):
    with open(os.path.join(LOG, host + ".times"), "a") as fh:
        fh.write("%s %r\n" % (what, time.time()))

def hang(host):
    child = subprocess.Popen(["sleep", "1000"])
    with open(os.path.join(LOG, host + ".pid"), "w") as fh:
        fh.write(str(child.pid))
    parent = os.getpid()
    if os.fork() == 0:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        pidfd = os.pidfd_open(parent)
        select.select([pidfd], [], [])
        mark(host, "end")
        os._exit(0)
    child.wait()

def run_here(command):
    proc = subprocess.run(shlex.split(command), capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr
'''

SSH_STUB = STUB_COMMON + r'''
args = sys.argv[1:]
options = []
while args and args[0] == "-o":
    options.append(args[1])
    args = args[2:]
host, command = args[0], " ".join(args[1:])
with open(os.path.join(LOG, host + ".argv"), "w") as fh:
    json.dump(sys.argv[1:], fh)
mark(host, "start")
if host.startswith("hang"):
    hang(host)
elif host.startswith("fail"):
    sys.stderr.write("ssh: connect to host %s port 22: Connection refused\n" % host)
    mark(host, "end")
    sys.exit(255)
else:
    rc, out, err = run_here(command)
    sys.stdout.write(out)
    sys.stderr.write(err)
    mark(host, "end")
    sys.exit(rc)
'''

PDSH_STUB = STUB_COMMON + r'''
import threading
from concurrent.futures import ThreadPoolExecutor
args = sys.argv[1:]
opts = {}
while args and args[0] in ("-w", "-f", "-t", "-u"):
    opts[args[0]] = args[1]
    args = args[2:]
command = " ".join(args)
with open(os.path.join(LOG, "pdsh.argv"), "w") as fh:
    json.dump(sys.argv[1:], fh)
hosts, limit = opts["-w"].split(","), float(opts["-u"])
outputs, errors = {}, []

def one(host):
    mark(host, "start")
    if host.startswith("hang"):
        proc = subprocess.Popen(["sleep", "1000"])
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            errors.append("pdsh@stub: %s: command timeout" % host)
    elif host.startswith("fail"):
        errors.append("%s: ssh: connect to host %s port 22: Connection refused" % (host, host))
        errors.append("pdsh@stub: %s: ssh exited with exit code 255" % host)
    else:
        rc, out, err = run_here(command)
        outputs[host] = out.splitlines()
    mark(host, "end")

with ThreadPoolExecutor(int(opts["-f"])) as pool:
    list(pool.map(one, hosts))
# real pdsh interleaves the hosts' lines
lines = [(h, outputs[h]) for h in hosts if h in outputs]
for i in range(max((len(l) for _, l in lines), default=0)):
    for host, out in lines:
        if i < len(out):
            print("%s: %s" % (host, out[i]))
for line in errors:
    sys.stderr.write(line + "\n")
'''


@pytest.fixture()
def stubs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """ssh and pdsh stand-ins first on PATH, the venv's distdoctor next; returns the log folder."""
    bin_dir, log = tmp_path / "bin", tmp_path / "log"
    bin_dir.mkdir()
    log.mkdir()
    for name, body in (("ssh", SSH_STUB), ("pdsh", PDSH_STUB)):
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\n{body}")
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{VENV_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STUB_LOG", str(log))
    return log


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "distdoctor"), *args], capture_output=True, text=True,
                          timeout=120, env=os.environ.copy())


def intervals(log: Path) -> dict[str, tuple[float, float]]:
    out = {}
    for path in log.glob("*.times"):
        marks = dict(line.split() for line in path.read_text().splitlines())
        out[path.stem] = (float(marks["start"]), float(marks["end"]))
    return out


def max_overlap(spans: dict[str, tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in spans.values()] + [(e, -1) for _, e in spans.values()])
    running = peak = 0
    for _, step in events:  # at equal times an end (-1) sorts before a start
        running += step
        peak = max(peak, running)
    return peak


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def check_outcome(data: dict, out_dir: Path, ok_hosts: list[str]) -> dict[str, str]:
    assert sorted(h["host"] for h in data["ok"]) == sorted(ok_hosts)
    for host in ok_hosts:
        doc = json.loads((out_dir / f"{host}.json").read_text())
        assert validate_snapshot(doc) == []
    assert sorted(p.stem for p in out_dir.glob("*.json")) == sorted(ok_hosts)
    return {f["host"]: f["reason"] for f in data["failed"]}


def test_ssh_timeout_failure_concurrency_and_partial_results(stubs: Path, tmp_path: Path) -> None:
    hosts = ["hang-1", "node-a", "fail-1", "node-b", "node-c", "node-d"]
    out_dir = tmp_path / "fleet"
    proc = run_cli("fleet", "collect", "--via", "ssh", "--hosts", ",".join(hosts), "-o",
                   str(out_dir), "--timeout", str(TIMEOUT), "--concurrency", "2", "--json")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    failed = check_outcome(data, out_dir, ["node-a", "node-b", "node-c", "node-d"])
    assert failed == {
        "hang-1": f"ssh: timed out after {TIMEOUT}s",
        "fail-1": "ssh failed (exit 255): ssh: connect to host fail-1 port 22: Connection refused"}
    # the hung host's whole process group was killed, its `sleep` child included
    assert gone(int((stubs / "hang-1.pid").read_text()))
    # never more than --concurrency at once; the hang held one slot while the rest went through
    spans = intervals(stubs)
    assert set(spans) == set(hosts)
    assert max_overlap(spans) == 2
    argv = json.loads((stubs / "node-a.argv").read_text())
    assert argv == ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={TIMEOUT}", "node-a",
                    "distdoctor collect"]
    # progress on stderr, one line per host as it finishes
    progress = [ln for ln in proc.stderr.splitlines() if ln.startswith("[")]
    assert [ln.split()[0] for ln in progress] == [f"[{i}/6]" for i in range(1, 7)]
    assert any(ln.split()[1:3] == ["hang-1", "FAILED:"] for ln in progress)


def test_pdsh_output_split_per_host_with_a_hang_and_a_failure(stubs: Path, tmp_path: Path) -> None:
    hosts = ["node-a", "hang-1", "node-b", "fail-1"]
    out_dir = tmp_path / "fleet"
    hostfile = tmp_path / "hosts.txt"
    hostfile.write_text("# the test fleet\n" + "\n".join(hosts) + "\n\n")
    proc = run_cli("fleet", "collect", "--via", "pdsh", "--hostfile", str(hostfile), "-o",
                   str(out_dir), "--timeout", str(TIMEOUT), "--concurrency", "3", "--json",
                   "--python", sys.executable)
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    failed = check_outcome(data, out_dir, ["node-a", "node-b"])
    assert failed == {"hang-1": f"timed out after {TIMEOUT}s (pdsh -u)",
                      "fail-1": "ssh: connect to host fail-1 port 22: Connection refused; "
                                "ssh exited with exit code 255"}
    assert json.loads((stubs / "pdsh.argv").read_text()) == [
        "-w", ",".join(hosts), "-f", "3", "-t", str(TIMEOUT), "-u", str(TIMEOUT),
        f"distdoctor collect --python {sys.executable}"]
    assert max_overlap(intervals(stubs)) <= 3
    # pdsh answers at the end; the hung host keeps it running past the 5 s tick
    assert re.search(rf"^\.\.\. still waiting for pdsh on 4 hosts \(at most {TIMEOUT}s each\): \d+s$",
                     proc.stderr, re.M), proc.stderr


def test_all_hosts_ok_is_exit_0_and_compare_reads_the_folder(stubs: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "fleet"
    proc = run_cli("fleet", "collect", "--via", "ssh", "--hosts", "node[1-2]", "-o", str(out_dir))
    assert proc.returncode == 0, proc.stderr
    assert "2 of 2 hosts answered" in proc.stdout
    assert f"distdoctor fleet compare {out_dir}/" in proc.stdout
    compared = run_cli("fleet", "compare", str(out_dir), "--json")
    assert compared.returncode == 0, compared.stdout
    # both snapshots come from this machine: same host name, told apart by file
    assert json.loads(compared.stdout)["nodes"] == 2


def test_local_collect(tmp_path: Path) -> None:
    proc = run_cli("fleet", "collect", "--via", "local", "-o", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stderr
    (ok,) = json.loads(proc.stdout)["ok"]
    assert validate_snapshot(json.loads(Path(ok["file"]).read_text())) == []


@pytest.mark.parametrize("args, message", [
    (["--via", "ssh"], "--via ssh needs hosts"),
    (["--via", "pdsh", "--hostfile", "/nonexistent/hosts"], "no such file"),
    (["--via", "ssh", "--hosts", "node[3-1]"], "counts down"),
    (["--via", "srun"], "needs a Slurm allocation"),
    (["--via", "local", "--hosts", "a"], "this node only"),
])
def test_bad_usage_is_one_line_and_exit_2(stubs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          args: list[str], message: str) -> None:
    srun = stubs.parent / "bin" / "srun"  # a Slurm install, but no allocation
    srun.write_text("#!/bin/sh\nexit 1\n")
    srun.chmod(0o755)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    proc = run_cli("fleet", "collect", *args, "-o", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("distdoctor: error: ")
    assert message in proc.stderr


def test_bad_flag_values_are_exit_2(tmp_path: Path) -> None:
    for args in (["--timeout", "0"], ["--concurrency", "-1"], ["--via", "telnet"],
                 ["--timeout", "nan"], ["--timeout", "inf"]):
        proc = run_cli("fleet", "collect", "--via", "local", "-o", str(tmp_path), *args)
        assert proc.returncode == 2 and "error:" in proc.stderr and "Traceback" not in proc.stderr


# ---- the srun path: the command line, and its output sorted per task ---------------------------

def test_srun_command_line() -> None:
    env = {"SLURM_JOB_ID": "4242", "SLURM_NNODES": "16", "SLURM_GPUS_ON_NODE": "8"}
    opts = FanoutOptions(via="srun", python="/opt/venv/bin/python")
    assert srun_argv(env, opts) == [
        "srun", "--nodes=16", "--ntasks=16", "--ntasks-per-node=1", "--overlap", "--label",
        "--kill-on-bad-exit=0", "--job-name=distdoctor-collect", "--gpus-per-node=8",
        "distdoctor", "collect", "--python", "/opt/venv/bin/python"]
    some = FanoutOptions(via="srun", hosts=("gpu01", "gpu02"), distdoctor="/opt/dd/bin/distdoctor")
    assert srun_argv({"SLURM_JOB_ID": "1", "SLURM_NNODES": "16"}, some) == [
        "srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--overlap", "--label",
        "--kill-on-bad-exit=0", "--job-name=distdoctor-collect", "--nodelist=gpu01,gpu02",
        "/opt/dd/bin/distdoctor", "collect"]
    with pytest.raises(SlurmError, match="SLURM_JOB_ID"):
        srun_argv({"SLURM_NNODES": "2"}, opts)


def test_ssh_and_pdsh_command_lines() -> None:
    opts = FanoutOptions(via="ssh", hosts=("a", "b"), timeout=90, concurrency=8,
                         python="/opt/my venv/bin/python")
    assert ssh_argv("a", opts) == ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "a",
                                   "distdoctor collect --python '/opt/my venv/bin/python'"]
    assert pdsh_argv(opts) == ["pdsh", "-w", "a,b", "-f", "8", "-t", "10", "-u", "90",
                               "distdoctor collect --python '/opt/my venv/bin/python'"]


def test_srun_output_is_sorted_per_task(tmp_path: Path) -> None:
    """srun's --label output, recorded: task 0 answers, task 1 fails, task 2 prints nothing."""
    from fleet_gen import base_snapshot

    doc = dict(base_snapshot(), host="gpu01")
    stdout = "\n".join(f" 0: {line}" for line in json.dumps(doc, indent=1).splitlines())
    stderr = (" 1: distdoctor: error: --python /opt/venv/bin/python: no such interpreter\n"
              "srun: error: gpu02: task 1: Exited with exit code 2\n")
    calls = []

    def runner(argv, *, timeout, env=None):
        calls.append(list(argv))
        if argv[0] == "scontrol":
            return CommandResult(tuple(argv), 0, "gpu01\ngpu02\ngpu03\n", "", 0.0)
        return CommandResult(tuple(argv), 2, stdout, stderr, 1.0)

    env = {"SLURM_JOB_ID": "7", "SLURM_NNODES": "3", "SLURM_JOB_NODELIST": "gpu[01-03]"}
    results = fan_out_srun(env, FanoutOptions(via="srun"), runner)
    assert [(r.host, r.ok) for r in results] == [("gpu01", True), ("gpu02", False), ("gpu03", False)]
    assert results[1].reason == ("distdoctor: error: --python /opt/venv/bin/python: no such "
                                 "interpreter (Exited with exit code 2)")
    assert results[2].reason == "no output"
    assert calls[0] == ["scontrol", "show", "hostnames", "gpu[01-03]"]


def test_split_pdsh_recorded_output() -> None:
    out = "n1: {\nn2: {\nn1:   \"a\": 1\nn1: }\nn2:\npdsh@login: n3: ssh exited with exit code 255\n"
    assert split_pdsh(out) == {"n1": ["{", '  "a": 1', "}"], "n2": ["{", ""],
                               "n3": ["ssh exited with exit code 255"]}


def test_parse_output_tolerates_a_banner_and_names_bad_output() -> None:
    from fleet_gen import base_snapshot

    from distdoctor.probes.fleet import parse_output

    text = json.dumps(base_snapshot(), indent=2)
    doc, reason = parse_output("Welcome to gpu07 (maintenance Friday)\n" + text)
    assert doc is not None and reason == ""
    # a cut anywhere (in a key, a string, a number, between items) reads as cut short
    for cut in range(1, len(text) - 1, 7):
        assert parse_output(text[:cut]) == (None, "bad output: the JSON is cut short"), cut
    assert parse_output('{"a": 1}}')[1].startswith("bad output, not a")
    assert parse_output("") == (None, "no output")
    assert parse_output("bash: distdoctor: command not found\n")[1].startswith("bad output, not a")
    newer = json.dumps(dict(base_snapshot(), schema="distdoctor.snapshot/2"))
    assert "writes distdoctor.snapshot/2" in parse_output(newer)[1]


def test_host_lists_that_would_hang_or_eat_memory_are_refused(tmp_path: Path) -> None:
    # a FIFO host file blocked the read, /dev/zero never ended, node[1-99999999] built a list
    # of a hundred million names before anything ran
    os.mkfifo(tmp_path / "hosts.fifo")
    for args, message in ((["--hostfile", str(tmp_path / "hosts.fifo")], "not a regular file"),
                          (["--hostfile", "/dev/zero"], "not a regular file"),
                          (["--hosts", "n[1-99999999]"], "more than 100000 hosts")):
        proc = run_cli("fleet", "collect", "--via", "ssh", *args, "-o", str(tmp_path / "out"))
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and message in proc.stderr


def test_a_hosts_binary_or_escape_output_is_not_echoed_raw() -> None:
    from distdoctor.probes.fleet.fanout import failure_reason

    res = CommandResult(("ssh",), 1, "", "ok\n\x1b[2J\x1b]0;pwned\x07\x00\xff junk\n", 0.1)
    reason = failure_reason(res, "ssh")
    assert reason.startswith("exit code 1: ") and reason.isprintable() and "\x1b" not in reason
