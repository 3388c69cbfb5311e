"""PyTorch's debug server as a source, on a real 2-rank Gloo job under torchrun that starts it with
`distdoctor.guard.debug_server()`: every rank's stacks and Flight Recorder read over HTTP (also
by `distdoctor stacks --debug-server URL` and `distdoctor fr URL`), and a
`run` whose py-spy cannot attach (as in a container without ptrace rights) still names the rank
that never reached the collective, from the server's stacks and live Flight Recorder."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("jinja2")
pytest.importorskip("tabulate")

from distdoctor.probes import debugserver, stacks  # noqa: E402
from distdoctor.probes.repro.proctree import free_port, port_is_free  # noqa: E402

pytestmark = pytest.mark.slow

JOB = r'''
import datetime, os, time
import torch
import torch.distributed as dist
import distdoctor.guard

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
distdoctor.guard.debug_server(port=int(os.environ["DBG_PORT"]))
rank = dist.get_rank()
t = torch.ones(4)
for _ in range(3):
    dist.all_reduce(t)
open(f"ready.{rank}", "w").close()
if rank == 1:
    time.sleep(300)
dist.all_reduce(t)
'''


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_stacks_and_flight_recorder_from_the_debug_server_name_the_rank_that_never_came(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from distdoctor.probes.watch import WatchConfig, watch_job
    from distdoctor.probes.watch.launched import JobTree
    from distdoctor.probes.watch.targets import Launched

    (tmp_path / "train.py").write_text(JOB)
    port, dbg = free_port(), free_port()
    url = f"http://127.0.0.1:{dbg}"
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", DBG_PORT=str(dbg),
               TORCH_FR_BUFFER_SIZE="2000")
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--master-addr=127.0.0.1",
            f"--master-port={port}", "train.py"]

    def refused() -> str:  # py-spy refused, as without ptrace rights
        raise stacks.NoPySpy("py-spy cannot attach here")

    monkeypatch.setattr("distdoctor.probes.stacks.dump.find_pyspy", refused)
    tree = JobTree(argv, env, tmp_path, tmp_path / "launcher.log")
    try:
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("ready.*"))) < 2:
            assert tree.proc.poll() is None and time.monotonic() < deadline, (tmp_path / "launcher.log").read_text()
            time.sleep(0.2)
        # the server starts listening in its own thread: ready means started, not yet listening
        while not _listening(dbg):
            assert time.monotonic() < deadline, (tmp_path / "launcher.log").read_text()
            time.sleep(0.2)
        doc = stacks.analyse(debugserver.stacks(url, timeout=30), ["0", "1"])
        assert doc["culprit"]["ranks"] == ["1"]
        assert [r["where"].split(" ")[0] for r in doc["ranks"]] == ["all_reduce", "<module>"]
        live = subprocess.run([sys.executable, "-m", "distdoctor.tui.cli", "stacks", "--debug-server", url,
                               "--json"], capture_output=True, text=True, timeout=120)
        assert live.returncode == 1, live.stderr
        assert json.loads(live.stdout)["culprit"]["ranks"] == ["1"]
        fr = subprocess.run([sys.executable, "-m", "distdoctor.tui.cli", "fr", url, "--json"],
                            capture_output=True, text=True, timeout=120)
        assert fr.returncode == 1, fr.stderr
        assert json.loads(fr.stdout)["culprit"]["ranks"] == ["1"], fr.stdout
        out = watch_job(Launched(tree), WatchConfig(stall_s=4, evidence=tmp_path / "evidence", kill_on_hang=True,
                                                   debug_server=url, debug_server_given=True,
                                                   log_sources=[str(tmp_path / "launcher.log")]))
    finally:
        tree.kill()
        tree.close()
    assert out.outcome == "hang"
    assert out.capture["stacks"]["source"] == "debug-server"
    assert out.verdict["culprit"]["ranks"] == ["1"]
    fr = out.capture["fr"]
    assert fr and any(item["ranks"] == ["1"] for item in fr["evidence"])
    assert sorted(Path(out.evidence["flight_recorder"]).glob("rank_*.json"))
    assert tree.survivors() == []
    assert port_is_free(port) and port_is_free(dbg)


def test_a_page_that_is_not_the_debug_servers_is_an_error_with_its_reason() -> None:
    with pytest.raises(debugserver.DebugServerError, match="no rank's answer"):
        debugserver.blocks("<html><body>hello</body></html>")
    with pytest.raises(debugserver.DebugServerError):
        debugserver.fetch(f"http://127.0.0.1:{free_port()}", "/stacks", timeout=5)


def test_faulthandlers_dump_gives_the_main_threads_frames() -> None:
    text = ('Current thread 0x00007f6546ffd6c0 (most recent call first):\n  <no Python frame>\n\n'
            'Thread 0x00007f6568424b80 (most recent call first):\n'
            '  File "/v/site-packages/torch/distributed/distributed_c10d.py", line 3252 in all_reduce\n'
            '  File "/job/train.py", line 10 in <module>\n')
    assert debugserver.parse_traceback(text) == [
        {"name": "all_reduce", "file": "/v/site-packages/torch/distributed/distributed_c10d.py", "line": 3252},
        {"name": "<module>", "file": "/job/train.py", "line": 10}]
