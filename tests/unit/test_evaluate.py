"""evaluate(): every op, dotted facts, soft templates, unavailable probes, and the packaged checks."""
from __future__ import annotations

import re
import string
from types import MappingProxyType
from typing import Any

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.evaluate import Finding, evaluate, fill
from distdoctor.knowledge.loader import OPS
from distdoctor.knowledge.model import Check, KnowledgeBase
from distdoctor.probes.base import ProbeResult, unavailable
from distdoctor.probes.fleet.schema import PROBE_NAMES
from distdoctor.probes.hardware import HARDWARE_PROBES
from distdoctor.probes.registry import PROBES

FACTS = {"n": 5, "name": "eth0", "flag": True, "off": False, "items": ["a", "b"], "none": None,
         "empty": [], "driver": {"version": "535.104.05", "gpus": [{"id": 0}]}}


def kb_with(*checks: Check) -> KnowledgeBase:
    empty = MappingProxyType({})
    return KnowledgeBase("t", empty, empty, MappingProxyType({c.id: c for c in checks}),
                         empty, empty, empty, empty, "classify")


def check(fact: str, op: str, value: Any = None, **kw: Any) -> Check:
    fields = {"id": "c", "probe": "p", "fact": fact, "op": op, "value": value, "status": "fail",
              "title": "bad {n}", "detail": "", "cause_ids": ("cuda-oom",)}
    return Check(**{**fields, **kw})


def status(c: Check, facts: dict = FACTS) -> str | None:
    found = evaluate(kb_with(c), {"p": ProbeResult("p", "ok", facts)})
    return found[0].status if found else None


CASES = [
    ("n", "eq", 5, True), ("n", "eq", 4, False), ("n", "ne", 4, True),
    ("n", "lt", 6, True), ("n", "le", 5, True), ("n", "gt", 5, False), ("n", "ge", 5, True),
    ("flag", "true", None, True), ("off", "true", None, False), ("off", "false", None, True),
    ("name", "present", None, True), ("none", "present", None, False),
    ("missing", "absent", None, True), ("none", "absent", None, True), ("name", "absent", None, False),
    ("items", "nonempty", None, True), ("empty", "nonempty", None, False), ("empty", "empty", None, True),
    ("name", "in", ["eth0", "eth1"], True), ("name", "not_in", ["eth0"], False),
    ("items", "contains", "b", True), ("name", "contains", "th", True),
    ("name", "matches", r"^eth\d$", True), ("name", "matches", r"^ib", False),
    ("driver.version", "matches", r"^535\.", True), ("driver.gpus.0.id", "eq", 0, True),
]


@pytest.mark.parametrize("fact,op,value,fires", CASES)
def test_every_op(fact: str, op: str, value: Any, fires: bool) -> None:
    assert status(check(fact, op, value)) == ("fail" if fires else "ok")


def test_ops_cover_the_loader_list() -> None:
    from distdoctor.knowledge import evaluate as ev

    assert set(ev.OPS) == set(OPS)
    assert {case[1] for case in CASES} == set(OPS)


@pytest.mark.parametrize("fact,op,value", [("missing", "eq", 1), ("none", "true", None),
                                           ("driver.nothing", "eq", 1), ("name", "lt", 3),
                                           ("n", "nonempty", None), ("name", "matches", "(")])
def test_unjudgeable_checks_are_skipped(fact: str, op: str, value: Any) -> None:
    assert status(check(fact, op, value)) is None


def test_finding_fields_and_templates() -> None:
    c = check("flag", "true", title="{name} has {items} on driver {driver.version}",
              detail="missing: {nope}; {n:>3}", fix="export NCCL_SOCKET_IFNAME={name}")
    (f,) = evaluate(kb_with(c), {"p": ProbeResult("p", "ok", FACTS)})
    assert f == Finding("p", "c", "fail", "eth0 has a, b on driver 535.104.05", "missing: <nope>;   5",
                        ("cuda-oom",), "export NCCL_SOCKET_IFNAME=eth0")
    assert f.to_dict()["cause_ids"] == ["cuda-oom"]


def test_ok_finding_uses_ok_title_and_carries_no_causes() -> None:
    (f,) = evaluate(kb_with(check("off", "true", ok_title="fine: {name}")),
                    {"p": ProbeResult("p", "ok", FACTS)})
    assert (f.status, f.title, f.cause_ids, f.fix) == ("ok", "fine: eth0", (), "")


@pytest.mark.parametrize("template, shown", [("{", "{"), ("}", "}"), ("{0}", "<0>"),
                                             ("{n!z}", "{n!z}"), ("{name:%Q}", "eth0")])
def test_malformed_templates_never_raise(template: str, shown: str) -> None:
    # not only a string: the template as written, or the field it names (never a traceback)
    assert fill(template, FACTS) == shown


def test_unavailable_and_error_probes_give_one_finding_with_reason() -> None:
    results = {"p": unavailable("p", "no NVIDIA driver"),
               "q": ProbeResult("q", "error", {}, reason="KeyError: 'x'")}
    found = evaluate(kb_with(check("flag", "true")), results)
    assert [(f.probe, f.status, f.detail) for f in found] == [
        ("p", "unavailable", "no NVIDIA driver"), ("q", "error", "KeyError: 'x'")]
    assert found[0].title == "p probe unavailable"


def test_packaged_checks_name_registered_probes_and_known_causes() -> None:
    kb = load_knowledge(use_env=False)
    assert kb.checks, "checks.toml must load"
    for c in kb.checks.values():
        assert c.probe in PROBES, c.id
        assert c.status in ("warn", "fail"), c.id
        assert c.fix or c.status == "warn", c.id
        assert set(c.cause_ids) <= set(kb.causes), c.id
        for template in (c.title, c.detail, c.fix, c.ok_title):
            for _, name, _, _ in string.Formatter().parse(template):
                assert name is None or re.match(r"^[a-z_][a-z0-9_.]*$", name), (c.id, name)


def test_topology_check_over_topo_facts() -> None:
    kb = load_knowledge(use_env=False)
    facts = {"p2p": "partial", "nvlink": "none", "pairs_without_p2p": ["GPU0-GPU1"]}
    found = {f.check: f for f in evaluate(kb, {"topology": ProbeResult("topology", "warn", facts)})}
    assert found["gpu-pairs-without-p2p"].status == "warn"
    assert found["gpu-pairs-without-p2p"].title == "GPU pairs without usable peer-to-peer: GPU0-GPU1"
    facts = {"p2p": "unknown", "pairs_without_p2p": []}
    found = {f.check: f for f in evaluate(kb, {"topology": ProbeResult("topology", "ok", facts)})}
    assert found["gpu-pairs-without-p2p"].title == "no GPU pair known to lack P2P (P2P support: unknown)"


def test_the_probes_run_in_their_order() -> None:
    """The method's own probes first, in its order (a snapshot requires them: fleet/schema.py), then
    the others: the hardware ones and any probe added later (which needs no change here)."""
    assert list(PROBES)[:len(PROBE_NAMES)] == list(PROBE_NAMES) == ["versions", "shm", "launch", "switches",
                                                                    "network", "topology"]
    assert set(HARDWARE_PROBES) <= set(PROBES)


def test_packaged_fixes_start_with_the_command_to_paste() -> None:
    """What comes before '   #' goes to a shell: prose there ("let one launcher set the ranks:
    torchrun ...", "upgrade the driver to ...") fails when pasted. Placeholders <...> may be prose."""
    kb = load_knowledge(use_env=False)
    for c in kb.checks.values():
        command = re.sub(r"<[^>]*>", "<x>", c.fix.split("   #")[0])
        assert not re.search(r"\w: |, |^(let|upgrade|derive|use|set|run) ", command), (c.id, c.fix)
