"""Every command distdoctor prints is safe to paste: hostile host names from snapshots are shown
as data, never inside a command, and the commands that are printed are run here, in a real
shell with stub programs, to prove nothing but the intended program runs."""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
from pathlib import Path

import pytest
from fleet_gen import base_snapshot, node_name, write_fleet

from distdoctor.probes.fleet.hosts import HostListError, expand_hosts, host_problem
from distdoctor.probes.repro import ReproOptions, manual_commands
from distdoctor.tui.cli import main

HOSTILE = ["-oProxyCommand=touch PWNED", "node-1;touch PWNED", "$(touch PWNED)", "`touch PWNED`",
           "node 1", "a\nb; touch PWNED", "x' ; touch PWNED '", "-F/dev/null", "n\x1b[2Jode",
           "--", "node|touch PWNED", "nöde&touch PWNED"]
GOOD = ["node-01", "user@node-01", "node-01:22", "10.0.0.1", "fe80::1", "gpu_a.cluster.local",
        "ip-10-0-0-1.ec2.internal"]


@pytest.mark.parametrize("host", HOSTILE)
def test_hostile_names_fail_validation_everywhere(host: str) -> None:
    assert host_problem(host)
    with pytest.raises(HostListError, match="bad host"):
        expand_hosts(host)


@pytest.mark.parametrize("host", GOOD)
def test_ordinary_names_pass(host: str) -> None:
    assert host_problem(host) == ""
    assert expand_hosts(host) == [host]


def stubs(directory: Path, *names: str) -> Path:
    """Programs that only write their argv (one per line) to <name>.argv, then succeed."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = directory / name
        path.write_text("#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done >> "
                        f"'{directory}/{name}.argv'\n")
        path.chmod(0o755)
    return directory


def paste(lines: list[str], bin_dir: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """What pasting these lines into a shell does, with only the stub programs on PATH."""
    return subprocess.run(["bash", "-c", "\n".join(lines)], cwd=cwd, capture_output=True,
                          text=True, timeout=60, env={"PATH": f"{bin_dir}:/usr/bin:/bin",
                                                      "HOME": str(cwd)})


def hostile_fleet(directory: Path) -> None:
    """Snapshots whose hosts are hostile, each an odd one out so it lands in `next:`."""
    base = base_snapshot()
    plants = {i: {"driver": f"535.{i}"} for i in range(len(HOSTILE))}
    paths = write_fleet(directory, len(HOSTILE) + 6, plants, base)
    for i, host in enumerate(HOSTILE):
        doc = json.loads(paths[i].read_text())
        doc["host"] = host
        paths[i].write_text(json.dumps(doc))


def test_fleet_compare_never_puts_a_hostile_host_in_a_command(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture) -> None:
    hostile_fleet(tmp_path / "fleet")
    assert main(["fleet", "compare", str(tmp_path / "fleet")]) == 1
    text = capsys.readouterr().out
    lines = text.splitlines()
    block = lines[lines.index("next:") + 1:]
    commands = [l.strip() for l in block if l.strip().startswith(("ssh ", "distdoctor "))]
    comments = [l.strip() for l in block if l.strip().startswith("#")]
    assert commands and comments
    for line in commands:
        for host in HOSTILE:
            assert host not in line and repr(host) not in line, line
    # the odd ones among the hostile hosts are named, quoted, as data: three, as for any host
    assert len([c for c in comments if "not a valid host name" in c]) == 3
    for line in lines:
        assert "\x1b" not in line  # an escape code from a host name never reaches the terminal
    bin_dir = stubs(tmp_path / "bin", "ssh", "distdoctor")
    done = paste(commands + comments, bin_dir, tmp_path)
    assert not list(tmp_path.rglob("PWNED*")), done.stderr
    # whatever ssh was asked, no option came from a snapshot
    argv = (bin_dir / "ssh.argv").read_text().splitlines() if (bin_dir / "ssh.argv").exists() else []
    assert all(a == "--" or not a.startswith("-") for a in argv), argv


def test_the_proxycommand_snapshot_of_the_report(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    """The reported case: the odd node's snapshot says its host is -oProxyCommand=..."""
    paths = write_fleet(tmp_path / "fleet", 4, {2: {"driver": "535.104.05"}})
    doc = json.loads(paths[2].read_text())
    doc["host"] = "-oProxyCommand=touch PWNED"
    paths[2].write_text(json.dumps(doc))
    main(["fleet", "compare", str(tmp_path / "fleet")])
    text = capsys.readouterr().out
    assert "ssh '-oProxyCommand" not in text and "ssh -- '-oProxyCommand" not in text
    comment = " ".join(l.strip().removeprefix("# ") for l in text.splitlines()
                       if l.strip().startswith("#"))
    assert ("the snapshot names its host '-oProxyCommand=touch PWNED': not a valid host name "
            "(starts with '-' (it would be read as an option))") in comment


def test_fleet_compare_json_names_the_bad_hosts(tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    hostile_fleet(tmp_path / "fleet")
    main(["fleet", "compare", "--json", str(tmp_path / "fleet")])
    data = json.loads(capsys.readouterr().out)
    bad = {b["host"]: b["reason"] for b in data["bad_hosts"]}
    assert set(bad) == set(HOSTILE)
    assert "option" in bad["-oProxyCommand=touch PWNED"]


def test_good_hosts_get_a_working_ssh_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    write_fleet(tmp_path / "fleet", 4, {2: {"driver": "535.104.05"}})
    main(["fleet", "compare", str(tmp_path / "fleet")])
    line = next(l.strip() for l in capsys.readouterr().out.splitlines()
                if l.strip().startswith("ssh "))
    bin_dir = stubs(tmp_path / "bin", "ssh")
    paste([line], bin_dir, tmp_path)
    assert (bin_dir / "ssh.argv").read_text().splitlines() == ["--", node_name(2), "distdoctor",
                                                                "check"]


def test_repro_manual_commands_and_bisect_line_paste_safely(tmp_path: Path) -> None:
    from distdoctor.tui.commands.repro import _bisect_command

    bin_dir = stubs(tmp_path / "bin", "scp", "python", "distdoctor")
    evil = {"NCCL_SOCKET_IFNAME": "$(touch PWNED1)", "GLOO_SOCKET_IFNAME": "a;touch PWNED2",
            "NCCL_DEBUG_SUBSYS": "`touch PWNED3`", "MY_TOKEN": "x$(touch PWNED4)"}
    opts = ReproOptions(python=str(bin_dir / "python"), backend="gloo", env=evil)
    script = tmp_path / "run dir; touch PWNED5" / "s.py"
    lines = [l for l in manual_commands(opts, script, master_addr="10.0.0.1").splitlines()
             if not l.startswith("#")]
    args = argparse.Namespace(python=str(bin_dir / "python") + " ;touch PWNED6", nproc=2,
                              backend="gloo", timeout=60.0, session=None,
                              env=[f"{k}={v}" for k, v in evil.items()])
    lines.append(_bisect_command(args))
    done = paste(lines, bin_dir, tmp_path)
    assert not list(tmp_path.rglob("PWNED*")), (lines, done.stderr)
    argv = (bin_dir / "python.argv").read_text().splitlines()
    assert argv[:2] == ["-m", "torch.distributed.run"] and str(script) in argv
    scp = (bin_dir / "scp.argv").read_text().splitlines()
    # the remote half is quoted for the remote shell too (legacy scp hands it to one)
    assert scp == [str(script), f"NODE1:{shlex.quote(str(script))}"]
    bisect = (bin_dir / "distdoctor.argv").read_text().splitlines()
    assert "NCCL_SOCKET_IFNAME=$(touch PWNED1)" in bisect  # passed on as data, never run


def test_verdict_export_line_is_quoted() -> None:
    from distdoctor.tui.commands.repro_view import render_bisect

    data = {"backend": "gloo", "baseline": {"outcome": "error", "duration_s": 1.0, "log": "/x"},
            "runs": [], "skipped": [], "baseline_passed": False, "run_dir": "/r",
            "verdict": {"env": "GLOO_SOCKET_IFNAME=eth0;touch PWNED", "cause": "nic-selection",
                        "cause_title": "", "why": "w", "permanent_fix": "f", "reminder": "r"}}
    text = render_bisect(data, None)
    assert "export GLOO_SOCKET_IFNAME='eth0;touch PWNED'" in text
