"""Comparisons as data (issue 23): a check's value naming another fact or a range, the packaged
checks that use them judging exactly as the probes' own booleans did, and a site overlay moving a
limit or a range."""
from __future__ import annotations

import itertools
import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from distdoctor.knowledge import KnowledgeError, load_knowledge
from distdoctor.knowledge.evaluate import evaluate, holds, spelled, value_error
from distdoctor.knowledge.model import Check, KnowledgeBase
from distdoctor.probes import cuda_driver
from distdoctor.probes.base import ProbeContext, ProbeResult
from distdoctor.probes.launch import probe_launch
from distdoctor.probes.netsel import IfAddr
from distdoctor.probes.network import selection_facts
from distdoctor.probes.versions import nccl_facts

KB = load_knowledge(use_env=False)


def check(fact: str, op: str, value: Any, **kw: Any) -> Check:
    fields = {"id": "c", "probe": "p", "fact": fact, "op": op, "value": value, "status": "fail",
              "title": "bad {n} vs {threshold}", "detail": "", "cause_ids": ("cuda-oom",)}
    return Check(**{**fields, **kw})


def status(c: Check, facts: dict[str, Any]) -> str | None:
    empty = MappingProxyType({})
    kb = KnowledgeBase("t", empty, empty, MappingProxyType({c.id: c}), empty, empty, empty, empty, "classify")
    found = evaluate(kb, {"p": ProbeResult("p", "ok", facts)})
    return found[0].status if found else None


def packaged(check_id: str, facts: Any, kb: KnowledgeBase = KB) -> str | None:
    """The packaged check's status on these facts: fail/warn, ok, or None when it stays silent."""
    c = kb.checks[check_id]
    verdict = holds(c, facts)
    return None if verdict is None else (c.status if verdict else "ok")


# --- the operand shapes ----------------------------------------------------------------------

@pytest.mark.parametrize("facts,fires", [
    ({"n": 5, "m": 4}, True), ({"n": 4, "m": 4}, False), ({"n": 3, "m": 4}, False),
])
def test_a_fact_against_another_fact(facts: dict, fires: bool) -> None:
    assert status(check("n", "gt", {"fact": "m"}), facts) == ("fail" if fires else "ok")


@pytest.mark.parametrize("facts", [{"n": 5}, {"n": 5, "m": None}, {"m": 4}, {"n": None, "m": 4},
                                   {"n": 5, "d": {}}])
def test_a_missing_fact_on_either_side_leaves_the_check_silent(facts: dict) -> None:
    assert status(check("n", "gt", {"fact": "m"}), facts) is None
    assert status(check("n", "in", {"min": 0, "below": {"fact": "m"}}), facts) is None
    assert status(check("n", "gt", {"fact": "d.x"}), facts) is None


def test_the_other_fact_is_quoted_as_the_threshold() -> None:
    (f,) = evaluate(KnowledgeBase("t", *[MappingProxyType({})] * 2,
                                  MappingProxyType({"c": check("n", "gt", {"fact": "m"})}),
                                  *[MappingProxyType({})] * 4, "classify"),
                    {"p": ProbeResult("p", "ok", {"n": 5, "m": 4})})
    assert f.title == "bad 5 vs 4"


@pytest.mark.parametrize("value,inside,outside", [
    ({"min": 1, "max": 65535}, [1, 65535, 29500], [0, 65536, -1, "29500", "x"]),
    ({"min": 0, "below": {"fact": "m"}}, [0, 3], [4, -1]),
    ({"max": 10}, [-5, 10], [11]),
    ({"min": [525, 60], "below": [570, 26]}, [[525, 60, 13], [535, 104, 5]], [[470, 82], [570, 26, 0]]),
    ([0, {"min": 2, "below": {"fact": "m"}}], [0, 2, 3], [1, 4]),
])
def test_ranges_and_lists_of_ranges(value: Any, inside: list, outside: list) -> None:
    for n in inside:
        assert status(check("n", "in", value), {"n": n, "m": 4}) == "fail", n
        assert status(check("n", "not_in", value), {"n": n, "m": 4}) == "ok", n
    for n in outside:
        assert status(check("n", "in", value), {"n": n, "m": 4}) == "ok", n


@pytest.mark.parametrize("op,value,why", [
    ("gt", {"fact": "m", "plus": 1}, "takes nothing else"),
    ("gt", {"fact": ""}, "must name a fact"),
    ("gt", {"min": 1}, "a range goes with op in or not_in"),
    ("in", {}, "an empty table"),
    ("in", {"low": 1}, "unknown key(s) low"),
    ("in", {"min": 1, "max": 3, "below": 4}, "not both"),
    ("in", {"min": "1"}, "min: a range bound is"),
    ("in", {"min": {"min": 1}}, "min: a range bound is"),
    ("true", {"fact": "m"}, "takes no value"),
    ("matches", {"fact": "m"}, "takes a pattern string"),
    ("eq", [1, {"fact": "m"}], "goes with op in or not_in"),
])
def test_malformed_values_are_named_and_never_judged(op: str, value: Any, why: str) -> None:
    assert why in value_error(op, value)
    assert status(check("n", op, value), {"n": 5, "m": 4}) is None


def test_every_packaged_check_has_a_well_formed_value() -> None:
    # the loader does not call value_error yet (knowledge/loader.py): this keeps the packaged data honest
    assert {c.id: value_error(c.op, c.value) for c in KB.checks.values() if value_error(c.op, c.value)} == {}


def test_the_packaged_checks_name_facts_their_probes_report() -> None:
    """Every { fact = ... } of a converted check names a fact its probe writes (a typo would
    leave the check silent forever)."""
    probe_facts = {
        "launch": set(probe_launch(ProbeContext(env={
            "WORLD_SIZE": "4", "RANK": "1", "LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "0", "SLURM_NTASKS": "4",
            "SLURM_PROCID": "1", "SLURM_STEP_ID": "0", "MASTER_PORT": "1", "CUDA_VISIBLE_DEVICES": "0"})).facts),
        "versions": set(cuda_driver.judge({"version": "535.104.05"}, "12.2")),
    }

    def named(value: Any) -> list[str]:
        if isinstance(value, dict):
            return [value["fact"]] if "fact" in value else [n for v in value.values() for n in named(v)]
        return [n for v in value for n in named(v)] if isinstance(value, list) else []

    for c in KB.checks.values():
        for name in named(c.value):
            assert name in probe_facts[c.probe], (c.id, name)


# --- the converted checks judge as the probes' booleans did ----------------------------------

NUMBERS = [None, "-1", "0", "1", "2", "3", "4", "8"]


@pytest.mark.parametrize("world,rank", itertools.product(NUMBERS, NUMBERS))
def test_rank_ranges_match_the_old_booleans(world: str | None, rank: str | None) -> None:
    env = {k: v for k, v in {"WORLD_SIZE": world, "RANK": rank, "LOCAL_WORLD_SIZE": world,
                             "LOCAL_RANK": rank}.items() if v is not None}
    facts = probe_launch(ProbeContext(env=env)).facts
    for check_id, old in (("rank-out-of-range", "rank_out_of_range"),
                          ("local-rank-out-of-range", "local_rank_out_of_range")):
        expected = None if old not in facts else ("fail" if facts[old] else "ok")
        assert packaged(check_id, facts) == expected


@pytest.mark.parametrize("visible,local_world", itertools.product(
    [None, "", "0", "0,1", "0,1,2", "0,1,2,3", "0,-1,2", "-1"], [None, "0", "1", "2", "4"]))
def test_visible_gpus_match_the_old_boolean(visible: str | None, local_world: str | None) -> None:
    env = {k: v for k, v in {"CUDA_VISIBLE_DEVICES": visible, "LOCAL_WORLD_SIZE": local_world}.items()
           if v is not None}
    facts = probe_launch(ProbeContext(env=env)).facts
    expected = None if "visible_gpus_short" not in facts else ("fail" if facts["visible_gpus_short"] else "ok")
    assert packaged("visible-gpus-vs-local-world-size", facts) == expected


@pytest.mark.parametrize("env,expected", [
    ({"SLURM_NTASKS": "8", "WORLD_SIZE": "8"}, "ok"),
    ({"SLURM_NTASKS": "8", "WORLD_SIZE": "4"}, "fail"),
    ({"TORCHELASTIC_RUN_ID": "j", "SLURM_NTASKS": "2", "LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "8"}, "ok"),
    ({"TORCHELASTIC_RUN_ID": "j", "SLURM_NTASKS": "2", "LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "2"}, "fail"),
    ({"WORLD_SIZE": "8"}, None),
])
def test_world_size_against_the_scheduler(env: dict, expected: str | None) -> None:
    facts = probe_launch(ProbeContext(env=env)).facts
    assert packaged("world-size-vs-scheduler", facts) == expected
    assert facts.get("world_size_vs_scheduler", None) is (None if expected is None else expected == "fail")


@pytest.mark.parametrize("env,expected", [
    ({"SLURM_PROCID": "2", "SLURM_STEP_ID": "0", "RANK": "2"}, "ok"),
    ({"SLURM_PROCID": "2", "SLURM_STEP_ID": "0", "RANK": "3"}, "fail"),
    ({"TORCHELASTIC_RUN_ID": "j", "SLURM_PROCID": "0", "RANK": "3"}, None),  # torchrun numbers its own
    ({"RANK": "3"}, None),
])
def test_rank_against_the_scheduler(env: dict, expected: str | None) -> None:
    assert packaged("rank-vs-scheduler", probe_launch(ProbeContext(env=env)).facts) == expected


@pytest.mark.parametrize("env,expected", [
    ({"TORCHELASTIC_RUN_ID": "j", "SLURM_NTASKS_PER_NODE": "4"}, "fail"),
    ({"TORCHELASTIC_RUN_ID": "j", "SLURM_TASKS_PER_NODE": "1(x2)"}, "ok"),
    ({"SLURM_NTASKS_PER_NODE": "4", "SLURM_PROCID": "0", "SLURM_STEP_ID": "0"}, None),  # no torchrun inside
])
def test_nested_launchers(env: dict, expected: str | None) -> None:
    assert packaged("nested-launchers", probe_launch(ProbeContext(env=env)).facts) == expected


@pytest.mark.parametrize("port,expected", [
    ("29500", "ok"), ("1", "ok"), ("65535", "ok"), ("0", "fail"), ("65536", "fail"), ("-1", "fail"),
    ("abc", "fail"), ("", "fail"), (" 29500", "fail"), ("²", "fail"), (None, None),
])
def test_master_port_range(port: str | None, expected: str | None) -> None:
    env = {"MASTER_PORT": port} if port is not None else {}
    assert packaged("master-port-invalid", probe_launch(ProbeContext(env=env)).facts) == expected


DRIVERS = ["390.48", "450.80.02", "470.223.02", "525.60.13", "530.30.02", "535.104.05", "550.54.15",
           "570.124.06", "580.65.06", "999.1"]
CUDAS = ["10.2", "11.0", "11.8", "12.0", "12.2", "12.8", "12.9", "13.0", "9.9", "nonsense"]


@pytest.mark.parametrize("cuda", CUDAS)
def test_driver_checks_match_the_old_booleans(cuda: str) -> None:
    for driver in DRIVERS:
        facts = cuda_driver.judge({"version": driver}, cuda)
        for check_id, old in (("driver-too-old-for-cuda", "driver_too_old"),
                              ("driver-older-than-cuda-toolkit", "driver_minor_compat_only")):
            expected = None if old not in facts else (KB.checks[check_id].status if facts[old] else "ok")
            assert packaged(check_id, facts) == expected, (driver, cuda, check_id)


@pytest.mark.parametrize("packages,libs,loaded", [
    ([], [], []), ([{"name": "nvidia-nccl-cu12", "version": "2.26.2"}], [], []),
    ([{"name": "nvidia-nccl-cu12", "version": "2.26.2"}, {"name": "nvidia-nccl-cu11", "version": "2.26.2"}], [], []),
    ([], [{"path": "/a/libnccl.so.2.18.3", "source": "system"}, {"path": "/b/libnccl.so.2.18.3", "source": "system"}], []),
    ([], [{"path": "/a/libnccl.so.2.18.3", "source": "system"}, {"path": "/b/libnccl.so.2.19.3", "source": "system"}], []),
    ([], [], ["/a/libnccl.so.2", "/b/libnccl.so.2"]),
])
def test_nccl_build_count_matches_the_old_rule(packages: list, libs: list, loaded: list) -> None:
    nccl = nccl_facts({"nccl_packages": packages, "nccl_libs": libs, "torch": {"nccl_loaded_paths": loaded}}, [])
    old = len(nccl["versions"]) > 1 or len(nccl["packages"]) > 1 or len(nccl["loaded_paths"]) > 1
    assert packaged("two-nccls-loaded", {"nccl": nccl}) == ("warn" if old else "ok")


IFACES = [{"name": n, "state": "up", "addresses": []} for n in ("lo", "eth0", "ib0")]
ORDER = [IfAddr("lo", 4, "127.0.0.1"), IfAddr("eth0", 4, "10.0.0.2"), IfAddr("ib0", 4, "10.1.0.2")]


@pytest.mark.parametrize("env,ifname,gloo", [
    ({}, None, None), ({"NCCL_SOCKET_IFNAME": "e"}, None, None),  # one character: NCCL ignores it
    ({"NCCL_SOCKET_IFNAME": "eth"}, "ok", None), ({"NCCL_SOCKET_IFNAME": "bond"}, "fail", None),
    ({"NCCL_SOCKET_IFNAME": "^eth,ib,lo"}, "fail", None),
    ({"GLOO_SOCKET_IFNAME": "eth0"}, None, "ok"), ({"GLOO_SOCKET_IFNAME": "eth0,eth1"}, None, "fail"),
    ({"GLOO_SOCKET_IFNAME": ""}, None, "ok"),
])
def test_interface_selection_checks(env: dict, ifname: str | None, gloo: str | None) -> None:
    facts = selection_facts(env, IFACES, ORDER)
    assert packaged("socket-ifname-matches-nothing", facts) == ifname
    assert packaged("gloo-ifname-not-found", facts) == gloo


@pytest.mark.parametrize("facts,expected", [
    ({"rdma_ports_active": 0}, "warn"), ({"rdma_ports_active": 2}, "ok"), ({}, None),
])
def test_rdma_ports_down(facts: dict, expected: str | None) -> None:
    assert packaged("rdma-ports-down", facts) == expected


# --- a site overlay moves the limit ----------------------------------------------------------

def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def _site(tmp_path: Path, check_id: str, **changes: Any) -> KnowledgeBase:
    """The knowledge with a site overlay whose entry for check_id is the packaged one with
    `changes` (an overlay's entry replaces the packaged entry of the same id, so it is written whole)."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    c = KB.checks[check_id]
    fields = {"id": c.id, "probe": c.probe, "fact": c.fact, "op": c.op, "value": c.value, "status": c.status,
              "title": c.title, "detail": c.detail, "cause_ids": c.cause_ids, "fix": c.fix,
              "ok_title": c.ok_title, **changes}
    (site / "checks.toml").write_text("[[check]]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in fields.items()),
                                      encoding="utf-8")
    return load_knowledge(site, use_env=False)


def _findings(kb: KnowledgeBase, env: dict[str, str]) -> dict[str, Any]:
    return {f.check: f for f in evaluate(kb, {"launch": probe_launch(ProbeContext(env=env))})}


def test_a_site_overlay_moves_the_port_range(tmp_path: Path) -> None:
    """A site that keeps rendezvous off the privileged ports fails MASTER_PORT=80, which the
    packaged range (1..65535) passes; the finding quotes the site's range."""
    kb = _site(tmp_path, "master-port-invalid", value={"min": 1024, "max": 65535},
               title="MASTER_PORT={master_port} is outside this site's range {threshold}")
    assert _findings(KB, {"MASTER_PORT": "80"})["master-port-invalid"].status == "ok"
    site = _findings(kb, {"MASTER_PORT": "80"})["master-port-invalid"]
    assert (site.status, site.title) == ("fail", "MASTER_PORT=80 is outside this site's range 1024..65535")
    assert _findings(kb, {"MASTER_PORT": "29500"})["master-port-invalid"].status == "ok"


def test_a_site_overlay_requires_a_newer_driver(tmp_path: Path) -> None:
    """The packaged check compares the driver with the floor of torch's CUDA build (another fact);
    a site that wants 535.104 or newer on every node writes that version instead."""
    facts = cuda_driver.judge({"version": "530.30.02"}, "12.0")
    kb = _site(tmp_path, "driver-too-old-for-cuda", value=[535, 104])
    assert packaged("driver-too-old-for-cuda", facts) == "ok"
    assert packaged("driver-too-old-for-cuda", facts, kb) == "fail"
    assert packaged("driver-too-old-for-cuda", cuda_driver.judge({"version": "535.104.05"}, "12.0"), kb) == "ok"


def test_a_site_overlay_moves_a_threshold_on_a_count(tmp_path: Path) -> None:
    """nested-launchers: a site whose torchrun agents legitimately share a node two by two."""
    env = {"TORCHELASTIC_RUN_ID": "j", "SLURM_NTASKS_PER_NODE": "2"}
    kb = _site(tmp_path, "nested-launchers", value=2)
    assert _findings(KB, env)["nested-launchers"].status == "fail"
    assert _findings(kb, env)["nested-launchers"].status == "ok"


def test_a_site_overlay_with_a_malformed_value_is_refused_on_load(tmp_path: Path) -> None:
    """A range bound that is neither a number, a version nor a { fact } table names the check and
    the field on load (`distdoctor knowledge validate` prints it), never a silent check later."""
    with pytest.raises(KnowledgeError) as err:
        _site(tmp_path, "master-port-invalid", value={"min": 1, "max": {"nope": 1}})
    assert "check.master-port-invalid.value" in str(err.value) and "max" in str(err.value)


@pytest.mark.parametrize("value, text", [
    ({"min": 1, "max": 65535}, "1..65535"),
    ({"min": 0, "below": {"fact": "world_size"}}, "0..<{world_size}"),
    ([0, {"min": 2, "below": {"fact": "local_world_size"}}], "[0, 2..<{local_world_size}]"),
    ({"fact": "driver_floor_parts"}, "{driver_floor_parts}"),
    (1 << 30, "1073741824"),
])
def test_knowledge_show_spells_a_value(value: Any, text: str) -> None:
    assert spelled(value) == text
