"""`distdoctor lint` on the drills' train.py (distdoctor.probes.drill): the script with the fault
fires the rule of the drill's cause, and the healthy job is clean."""
from __future__ import annotations

import pytest

from distdoctor.probes.drill import catalog
from distdoctor.probes.drill.template import render
from distdoctor.probes.lint import lint_source

# drill -> the rule its script must fire; drills whose fault is only at run time (a raise, the
# network, the launch command) are listed with None: lint must not invent a finding for them
EXPECTED = {
    "silent-exit": "DD902", "straggler": "DD801", "asymmetric": "DD101", "uneven-data": "DD201",
    "rank0-eval": "DD801", "spawn-in-torchrun": "DD301", "same-data": "DD501", "resume-skew": "DD703",
    "crash": None, "port-in-use": None, "world-size": None, "wrong-nic": None,
}


def test_healthy_drill_is_clean() -> None:
    assert lint_source(render(catalog.HEALTHY.blocks), "healthy/train.py") == []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_drill_script(name: str) -> None:
    drill = catalog.DRILLS.get(name)
    if drill is None:
        pytest.skip(f"no drill named {name} in this catalog")
    found = lint_source(render(drill.blocks), f"{name}/train.py")
    rule = EXPECTED[name]
    if rule is None:
        assert found == [], [(f.rule, f.line) for f in found]
        return
    assert [f.rule for f in found] == [rule], [(f.rule, f.line) for f in found]
    # straggler: a slow rank between collectives is rank0-overload's mechanism; the drill's
    # label calls the timeout it causes collective-timeout
    assert found[0].cause_id == drill.cause or (name, found[0].cause_id) == ("straggler", "rank0-overload")
