"""`distdoctor lint` rules: the table, each rule's firing script and silent twin, aliases, frameworks."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.probes.lint import as_evidence, lint_paths, lint_source, rules

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lint"
RULE_IDS = sorted(rules())


def test_rule_table_ids_causes_and_fixes() -> None:
    causes = load_knowledge(use_env=False).causes
    for rule_id, rule in rules().items():
        assert re.fullmatch(r"DD[1-9]\d\d", rule_id)
        assert rule.cause in causes, f"{rule_id}: {rule.cause} is not a GUIDE cause id"
        assert rule.message.endswith(".") and rule.message.count(". ") == 0, f"{rule_id}: one sentence"
        compile(rule.fix, rule_id, "exec")  # the fix is code that parses
    # every one of the nine rule groups has at least one rule
    assert {r[2] for r in RULE_IDS} == set("123456789")


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_fires_on_its_script_and_not_on_the_twin(rule_id: str) -> None:
    fire = FIXTURES / f"{rule_id.lower()}_fire.py"
    twin = FIXTURES / f"{rule_id.lower()}_ok.py"
    found = lint_source(fire.read_text(), str(fire))
    assert [f.rule for f in found] == [rule_id], [(f.rule, f.line, f.message) for f in found]
    assert found[0].cause_id == rules()[rule_id].cause
    assert found[0].file == str(fire) and found[0].line > 1 and found[0].col >= 1
    clean = lint_source(twin.read_text(), str(twin))
    assert clean == [], [(f.rule, f.line, f.message) for f in clean]


def test_finding_points_at_the_collective_through_a_local_function() -> None:
    found = lint_source((FIXTURES / "dd101_fire.py").read_text(), "dd101_fire.py")
    assert (found[0].line, found[0].col) == (20, 22)  # evaluate(...) inside `if rank == 0:`
    assert "evaluate() -> dist.all_reduce (line 10)" in found[0].message


def test_aliases_are_followed() -> None:
    found = lint_source((FIXTURES / "aliases_fire.py").read_text(), "aliases_fire.py")
    assert [(f.rule, f.line) for f in found] == [("DD101", 13), ("DD101", 18)]
    assert "`reduce_all`" in found[0].message and "`barrier`" in found[1].message


@pytest.mark.parametrize("name", ["dd503_ok.py", "dd504_ok.py", "framework_hf_trainer.py"])
def test_framework_scripts_are_clean(name: str) -> None:
    """accelerate (prepare, wait_for_everyone + is_main_process), Lightning (sampler added,
    is_global_zero, @rank_zero_only, sync_dist) and the HF Trainer do these things for the script."""
    assert lint_source((FIXTURES / name).read_text(), name) == []


def test_uniform_conditions_are_not_rank_branches() -> None:
    """`local_rank == -1` (distributed or not), `"LOCAL_RANK" in os.environ` (launched how) and
    `args.rank = ...` (an attribute set, `args` itself not a rank) are the same on every rank."""
    src = '''
import os, datetime
import torch.distributed as dist
def main(args):
    args.rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=5))
    if args.local_rank != -1:
        dist.barrier()
    if "LOCAL_RANK" in os.environ:
        dist.barrier()
    if args.distributed:
        dist.barrier()
    dist.destroy_process_group()
'''
    assert lint_source(src) == []


def test_rank_through_assignment_and_framework_helpers() -> None:
    src = '''
import datetime
import torch.distributed as dist
def log(accelerator, trainer, loss):
    if accelerator.is_local_main_process:
        accelerator.wait_for_everyone()
    if trainer.is_global_zero:
        trainer.strategy.barrier()
    leader = dist.get_rank() % 8 == 0
    if leader:
        dist.all_gather_object([None, None], loss)
'''
    assert [f.line for f in lint_source(src)] == [6, 8, 11]


def test_as_evidence_shape() -> None:
    found = lint_paths([str(FIXTURES / "dd101_fire.py")]).findings
    ev = as_evidence(found)
    assert ev == [{"source": "lint", "ranks": [], "role": "misconfigured", "why": ev[0]["why"],
                   "cause": "asymmetric-collective", "file": found[0].file, "line": found[0].line}]
    assert ev[0]["why"].startswith("DD101 at dd101_fire.py:20: ")
    assert as_evidence([found[0].to_dict()]) == ev
