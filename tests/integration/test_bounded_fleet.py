"""Fleet and repro lines (issue 25, item 13): a symlink loop in a fleet folder hides no other
snapshot, a snapshot host `node9:22` is suggested as `ssh -p 22 -- node9`, and the repro's scp
line quotes the remote path for the remote shell too."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
from boundkit import run, sane
from fleet_gen import write_fleet

from distdoctor.probes.fleet.fanout import FanoutOptions, ssh_argv
from distdoctor.probes.fleet.hosts import ssh_destination
from distdoctor.probes.repro import ReproOptions
from distdoctor.probes.repro.script import manual_commands


def test_a_symlink_loop_hides_no_other_snapshot(tmp_path: Path) -> None:
    folder = tmp_path / "fleet"
    write_fleet(folder, 3, plants={2: {"torch": "2.0.0"}})
    os.symlink("loop.json", folder / "loop.json")  # ELOOP on every stat
    os.symlink("b", folder / "a")
    os.symlink("a", folder / "b")
    rc, out, err, rss = run("fleet", "compare", "--json", str(folder))
    sane(rc, out, err, rss, codes=(1,))
    doc = json.loads(out)
    assert doc["nodes"] == 3
    assert any("loop.json" in s["file"] for s in doc["skipped"])


@pytest.mark.parametrize("host, args", [
    ("node9:22", ["-p", "22", "node9"]),
    ("bob@node9:2222", ["-p", "2222", "bob@node9"]),
    ("[fe80::1]:22", ["-p", "22", "fe80::1"]),
    ("fe80::1", ["fe80::1"]),
    ("node9", ["node9"]),
])
def test_ssh_takes_the_port_apart(host: str, args: list[str]) -> None:
    assert ssh_destination(host) == args
    argv = ssh_argv(host, FanoutOptions(via="ssh", hosts=[host]))
    assert argv[-1 - len(args):-1] == args


def test_the_next_line_for_a_host_with_a_port(tmp_path: Path) -> None:
    folder = tmp_path / "fleet"
    paths = write_fleet(folder, 3, plants={2: {"torch": "2.0.0"}})
    paths[2].write_text(paths[2].read_text().replace('"host": "node-02"', '"host": "node9:22"', 1))
    rc, out, err, rss = run("fleet", "compare", str(folder))
    sane(rc, out, err, rss, codes=(1,))
    assert "ssh -p 22 -- node9 distdoctor check" in out
    assert "ssh -- node9:22" not in out


@pytest.mark.parametrize("path", ["/tmp/r/s.py", "/tmp/run $(touch PWNED)/s.py", "/tmp/a'b;id/s.py",
                                  "/tmp/`id`/x y.py"])
def test_the_scp_line_is_safe_on_both_shells(tmp_path: Path, path: str) -> None:
    line = manual_commands(ReproOptions(python="/opt/env/bin/python"), path,
                           master_addr="10.1.2.3").splitlines()[1]
    local = shlex.split(line)  # what the pasting shell hands scp
    assert local[:2] == ["scp", path]
    remote = local[2].removeprefix("NODE1:")
    # legacy scp: the remote shell reads it; it must give back the path and run nothing
    done = subprocess.run(["sh", "-c", f"printf '%s' {remote}"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=10)
    assert done.stdout == path
    assert not (tmp_path / "PWNED").exists()
