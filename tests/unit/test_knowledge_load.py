"""The packaged knowledge base loads, validates and resolves every reference."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from distdoctor.knowledge import KnowledgeError, load_knowledge
from distdoctor.knowledge.tree import build_graph, main_path

GUIDE_IDS = {
    "rank-crash-deadlock", "cuda-oom", "collective-timeout", "version-mismatch", "shm-insufficient",
    "network-unreachable", "nic-selection", "p2p-unsupported", "ib-rdma-failure", "rank-env-mismatch",
    "master-addr-port", "mixed-launchers", "asymmetric-collective", "rank0-overload",
    "data-sharding-seed", "checkpoint-state-divergence",
}


def test_all_guide_causes_present() -> None:
    kb = load_knowledge(use_env=False)
    assert GUIDE_IDS <= set(kb.causes)  # the guide's causes; later ones (gpu-hardware-fault) may follow
    assert "gpu-hardware-fault" in kb.causes


def test_tree_is_the_method_in_order() -> None:
    """The guide's layered method, in its order, from the first step to the last; a step added
    between two of them (a site's own, a new one) keeps the method, so it does not fail this."""
    kb = load_knowledge(use_env=False)
    path = main_path(kb)
    method = ["classify", "logs", "environment", "repro", "bisect", "conclusion"]
    assert [s for s in path if s in method] == method
    assert (path[0], path[-1]) == ("classify", "conclusion")
    assert build_graph(kb).number_of_nodes() == len(kb.steps)


def test_overlay_unknown_cause_is_reported_with_file_and_key(tmp_path: Path) -> None:
    (tmp_path / "site.toml").write_text(
        '[[check]]\nid = "site-thing"\nprobe = "shm"\nfact = "size_bytes"\nop = "lt"\nvalue = 1\n'
        'status = "warn"\ntitle = "t"\ndetail = "d"\ncause_ids = ["no-such-cause"]\n')
    with pytest.raises(KnowledgeError) as err:
        load_knowledge(tmp_path)
    assert err.value.file.endswith("site.toml")
    assert err.value.key == "check.site-thing.cause_ids"
    assert "no-such-cause" in err.value.reason


def test_tree_cycle_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "loop.toml").write_text(
        '[[step]]\nid = "bisect"\ntitle = "b"\nkind = "step"\nnext = ["repro"]\n')
    with pytest.raises(KnowledgeError, match="unreachable|cycle|leaf|conclusion"):
        load_knowledge(tmp_path)


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text("[[cause]\nid=")
    with pytest.raises(KnowledgeError, match=re.escape(str(tmp_path / "bad.toml"))):
        load_knowledge(tmp_path)


@pytest.mark.parametrize("line, key, reason", [
    ("weight = nan", "weight", "must be a number from 0 to 100"),  # NaN scores broke --json
    ("weight = 1e308", "weight", "must be a number from 0 to 100"),
    ("weight = -2.0", "weight", "must be a number from 0 to 100"),
    ('tags = ["failure", "bogustag"]', "tags", "unknown tag 'bogustag'"),
    ('pattern = ""', "pattern", "matches an empty line"),
    ('pattern = "(WARN)?"', "pattern", "matches an empty line"),
])
def test_overlay_signatures_that_would_break_scoring_are_refused(tmp_path: Path, line: str,
                                                                 key: str, reason: str) -> None:
    fields = {"id": '"site-sig"', "cause": '"shm-insufficient"', "pattern": '"site says no"',
              "weight": "1.0", "tags": '["failure"]'}
    name, _, value = line.partition(" = ")
    fields[name] = value
    (tmp_path / "site.toml").write_text(
        "[[signature]]\n" + "".join(f"{k} = {v}\n" for k, v in fields.items()))
    with pytest.raises(KnowledgeError) as err:
        load_knowledge(tmp_path)
    assert err.value.key == f"signature.site-sig.{key}" and reason in err.value.reason
