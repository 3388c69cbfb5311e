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
    assert set(kb.causes) == GUIDE_IDS


def test_tree_is_the_method_in_order() -> None:
    kb = load_knowledge(use_env=False)
    assert main_path(kb) == ["classify", "logs", "environment", "repro", "bisect", "conclusion"]
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
