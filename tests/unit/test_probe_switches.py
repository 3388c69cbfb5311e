"""Switches probe: environment plus NCCL's config files, with NCCL's precedence."""
from __future__ import annotations

from pathlib import Path

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.evaluate import evaluate
from distdoctor.probes.base import ProbeContext
from distdoctor.probes.switches import parse_conf, probe_switches


def ctx(tmp_path: Path, env: dict[str, str], etc: str | None = None, user: str | None = None) -> ProbeContext:
    root, home = tmp_path / "root", tmp_path / "home"
    (root / "etc").mkdir(parents=True, exist_ok=True)
    home.mkdir(exist_ok=True)
    if etc is not None:
        (root / "etc/nccl.conf").write_text(etc)
    if user is not None:
        (home / ".nccl.conf").write_text(user)
    return ProbeContext(root=root, home=home, env=env)


def findings(context: ProbeContext) -> dict:
    result = probe_switches(context)
    return {f.check: f for f in evaluate(load_knowledge(use_env=False), {"switches": result})}


def test_parse_conf_follows_nccl_format() -> None:
    text = "# site defaults\nNCCL_IB_DISABLE=1\n  NCCL_SOCKET_IFNAME = eth0  # mgmt excluded\nbogus line\n=x\n"
    assert parse_conf(text) == {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "eth0"}


def test_environment_wins_then_user_file_then_etc(tmp_path: Path) -> None:
    context = ctx(tmp_path, {"NCCL_DEBUG": "WARN", "HOME": "/x", "TORCH_NCCL_BLOCKING_WAIT": "1"},
                  etc="NCCL_DEBUG=INFO\nNCCL_P2P_DISABLE=1\nNCCL_IB_HCA=mlx5\n",
                  user="NCCL_IB_HCA=mlx5_0\n")
    facts = probe_switches(context).facts
    variables = facts["variables"]
    assert variables["NCCL_DEBUG"] == {"value": "WARN", "source": "env"}
    assert variables["NCCL_IB_HCA"] == {"value": "mlx5_0", "source": "~/.nccl.conf"}
    assert variables["NCCL_P2P_DISABLE"] == {"value": "1", "source": "/etc/nccl.conf"}
    assert "HOME" not in variables
    assert {(s["name"], s["source"], s["by"]) for s in facts["shadowed"]} == {
        ("NCCL_DEBUG", "/etc/nccl.conf", "env"), ("NCCL_IB_HCA", "/etc/nccl.conf", "~/.nccl.conf")}
    assert facts["debug_switches_on"] == ["NCCL_P2P_DISABLE=1 (in /etc/nccl.conf)"]
    assert facts["debug_fix"] == "delete the NCCL_P2P_DISABLE= line from /etc/nccl.conf"


def test_nccl_conf_file_replaces_the_user_file(tmp_path: Path) -> None:
    context = ctx(tmp_path, {"NCCL_CONF_FILE": "/opt/site/nccl.conf"}, user="NCCL_ALGO=Ring\n")
    site = tmp_path / "root/opt/site"
    site.mkdir(parents=True)
    (site / "nccl.conf").write_text("NCCL_SOCKET_IFNAME=ib0\n")
    facts = probe_switches(context).facts
    assert facts["variables"]["NCCL_SOCKET_IFNAME"]["source"] == "/opt/site/nccl.conf"
    assert "NCCL_ALGO" not in facts["variables"]
    assert [f["path"] for f in facts["config_files"]] == ["/opt/site/nccl.conf", "/etc/nccl.conf"]
    found = findings(context)
    assert found["nccl-conf-file-switches"].status == "warn"
    assert "NCCL_SOCKET_IFNAME=ib0 (/opt/site/nccl.conf)" in found["nccl-conf-file-switches"].title


@pytest.mark.parametrize("old,new", [("NCCL_BLOCKING_WAIT", "TORCH_NCCL_BLOCKING_WAIT"),
                                     ("NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING"),
                                     ("TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE"),
                                     ("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_FR_DUMP_TEMP_FILE")])
def test_deprecated_names_come_with_their_replacement(tmp_path: Path, old: str, new: str) -> None:
    found = findings(ctx(tmp_path, {old: "1"}))
    assert found["deprecated-variable"].status == "warn"
    assert found["deprecated-variable"].title == f"deprecated variable names: {old} -> {new}"
    assert found["deprecated-variable"].fix == f"unset {old}; export {new}=1"


def test_debugging_switches_left_on(tmp_path: Path) -> None:
    env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_IB_DISABLE": "1",
           "NCCL_P2P_DISABLE": "0", "TORCH_DISTRIBUTED_DEBUG": "DETAIL"}
    found = findings(ctx(tmp_path, env))
    assert found["verbose-logging-left-on"].status == "warn"
    assert found["verbose-logging-left-on"].title == (
        "debug logging is on: NCCL_DEBUG=INFO, TORCH_DISTRIBUTED_DEBUG=DETAIL, NCCL_DEBUG_SUBSYS=INIT,NET")
    # NCCL_P2P_DISABLE=0 is not a bisection switch left on
    assert found["debug-switch-left-on"].title == "bisection switches are on: NCCL_IB_DISABLE=1"
    assert found["debug-switch-left-on"].fix.startswith("unset NCCL_IB_DISABLE")


def test_hardened_defaults(tmp_path: Path) -> None:
    found = findings(ctx(tmp_path, {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0", "TORCH_FR_BUFFER_SIZE": "0"}))
    assert found["error-handling-off"].status == "fail"
    assert found["flight-recorder-off"].status == "warn"
    assert found["no-explicit-timeouts"].status == "warn"
    found = findings(ctx(tmp_path, {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0",
                                    "TORCH_NCCL_BLOCKING_WAIT": "1"}))
    assert found["error-handling-off"].status == "ok"
    assert found["no-explicit-timeouts"].status == "ok"


def test_clean_environment_only_gives_advice(tmp_path: Path) -> None:
    found = findings(ctx(tmp_path, {"PATH": "/usr/bin"}))
    assert {c for c, f in found.items() if f.status != "ok"} == {"no-explicit-timeouts"}


def test_unreadable_config_file_is_reported_not_raised(tmp_path: Path) -> None:
    context = ctx(tmp_path, {})
    (tmp_path / "root/etc/nccl.conf").mkdir()  # a directory where a file should be
    facts = probe_switches(context).facts
    etc = [f for f in facts["config_files"] if f["path"] == "/etc/nccl.conf"][0]
    assert etc["read"] is False and etc["reason"]
