"""knowledge/nccl_grammar.py: each piece of NCCL's line grammar reads its real line and refuses a
near miss, and the topology and RAS readers take their NCCL patterns from it (no second copy)."""
from __future__ import annotations

import re

import pytest

from distdoctor.knowledge import nccl_grammar as grammar
from distdoctor.knowledge.logs import extract
from distdoctor.probes import ras
from distdoctor.probes.topology import load, parse_nccl_log

INFO = "gpu-node-01:2270:2270 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>"
WARN = "gpu-node-01:2270:2301 [3] misc/socket.cc:484 NCCL WARN Net : Connect to 10.0.0.2<43127> failed"
TESTS = "#  Rank  1 Group  0 Pid  43398 on gpu-node-01 device  1 [0000:07:00] NVIDIA A100-SXM4-80GB"
TESTS_OLD = "#   Rank  0 Pid  43398 on gpu-node-01 device  0 [0x07] Tesla V100-SXM2-16GB"


def test_line_reads_info_and_warn_headers() -> None:
    m = grammar.LINE_RX.search("[rank0]:" + INFO)
    assert m is not None
    assert (m["host"], m["pid"], m["tid"], m["dev"], m["level"]) == ("gpu-node-01", "2270", "2270", "0", "INFO")
    assert m["rest"] == "Bootstrap : Using eth0:10.0.0.1<0>"
    w = grammar.LINE_RX.search(WARN)
    assert w is not None and (w["dev"], w["level"]) == ("3", "WARN")
    assert w["rest"].startswith("Net : Connect")
    empty_host = grammar.LINE_RX.search(":77:78 [1] NCCL INFO comm 0x1 rank 1")
    assert empty_host is not None and empty_host["host"] == ""


@pytest.mark.parametrize("near", [
    "gpu-node-01:2270:2270 [0] NCCL DEBUG Bootstrap",   # no such level
    "gpu-node-01:2270:2270 [x] NCCL INFO Bootstrap",    # the device is a number
    "gpu-node-01:2270 [0] NCCL INFO Bootstrap",         # pid without tid
    "[0] NCCL INFO Bootstrap",                           # no host:pid:tid
    "gpu-node-01:2270:2301 [0] socket.cc NCCL WARN x",  # WARN's source is file:line
])
def test_line_refuses_near_misses(near: str) -> None:
    assert grammar.LINE_RX.search(near) is None


def test_version_banner() -> None:
    m = grammar.VERSION_RX.search("gpu-node-01:1:1 [0] NCCL INFO NCCL version 2.18.1+cuda12.1")
    assert m is not None and (m["full"], m["version"], m["cuda"]) == ("2.18.1+cuda12.1", "2.18.1", "12.1")
    bare = grammar.VERSION_RX.match("NCCL version 2.26.2 compiled with CUDA 12.8")
    assert bare is not None and (bare["full"], bare["cuda"]) == ("2.26.2", None)
    assert grammar.VERSION_RX.search("NCCL version 2.18 (cuda 12.1)") is None  # a release is x.y.z


def test_env_set() -> None:
    m = grammar.ENV_SET_RX.search("NCCL INFO NCCL_P2P_DISABLE set by environment to 1.")
    assert m is not None and (m["name"], m["value"]) == ("NCCL_P2P_DISABLE", "1")
    dotted = grammar.ENV_SET_RX.search("NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0.5.")
    assert dotted is not None and dotted["value"] == "eth0.5"
    assert grammar.ENV_SET_RX.search("NCCL INFO NCCL_P2P_DISABLE set by environment to 1. ignored") is None
    assert grammar.ENV_SET_RX.search("NCCL INFO CUDA_VISIBLE_DEVICES set by environment to 0") is None


def test_tests_rank_lines() -> None:
    m = grammar.TESTS_RANK_RX.search(TESTS)
    assert m is not None
    assert (m["rank"], m["pid"], m["host"], m["dev"], m["bus"], m["gpu"]) == (
        "1", "43398", "gpu-node-01", "1", "0000:07:00", "NVIDIA A100-SXM4-80GB")
    old = grammar.TESTS_RANK_RX.search(TESTS_OLD)
    assert old is not None and (old["rank"], old["bus"]) == ("0", "0x07")
    assert grammar.TESTS_RANK_RX.search("#  Rank  1 Group  0 Pid  43398 on gpu-node-01 device  1 NVIDIA") is None
    assert grammar.TESTS_RANK_RX.search("#  Rank  1 Group  0 on gpu-node-01 device  1 [0x07] A100") is None


def test_anonymous_lets_pieces_share_group_names() -> None:
    joined = "|".join(grammar.anonymous(p) for p in (grammar.HEADER, grammar.TESTS_RANK_HEAD))
    rx = re.compile(joined)
    assert rx.groups == 0
    assert rx.search(INFO) and rx.search(TESTS) and not rx.search("Rank 3 of 8 on node 2")


def test_pieces_start_a_match_once_per_word() -> None:
    # A piece that could start at every character of a long word rescans the word from each of
    # them (quadratic: ENV_SET without its lookbehind takes 2.8 s on 40 kB of "NCCL_"): the
    # header and ENV_SET start only where a word starts, the others on a literal.
    assert grammar.HEADER.startswith(grammar.WORD_START)
    assert grammar.ENV_SET.startswith(r"(?<!\w)")
    assert grammar.VERSION.startswith("NCCL version ") and grammar.TESTS_RANK.startswith("#")
    assert grammar.ENV_SET_RX.search("NCCL_" * 4000) is None
    assert grammar.LINE_RX.search("a" * 20_000 + ":1:2") is None
    assert grammar.ENV_SET_RX.search("XNCCL_P2P_DISABLE set by environment to 1.") is None


def test_logs_topology_and_ras_take_their_patterns_from_the_grammar() -> None:
    assert extract.NCCL_VERSION is grammar.VERSION_RX and extract.ENV_SET is grammar.ENV_SET_RX
    assert grammar.TESTS_RANK_DEVICE in extract.NCCL_TESTS_RANK.pattern
    assert grammar.ORIGIN in extract._NCCL_HOST.pattern and grammar.DEVICE in extract._NCCL_BARE.pattern
    assert parse_nccl_log.PREFIX is grammar.LINE_RX
    assert parse_nccl_log.TESTS_RANK is grammar.TESTS_RANK_RX
    assert parse_nccl_log.ENV_SET is grammar.ENV_SET_RX
    assert parse_nccl_log.VERSION is grammar.VERSION_RX
    assert grammar.anonymous(grammar.HEADER) in load.NCCL_MARK.pattern
    assert grammar.anonymous(grammar.TESTS_RANK_HEAD) in load.NCCL_MARK.pattern
    # no module keeps its own spelling of the header, the banner or nccl-tests' rank line
    for module in (extract, parse_nccl_log, load, ras):
        source = open(module.__file__, encoding="utf-8").read()
        for own in (r"\[(?P<dev>\d+)\]", r"\[\d+\] (?:\S+ )?NCCL", r"NCCL version (", r"#\s*Rank",
                    '"NCCL version "', "set by environment to ("):
            assert own not in source, f"{module.__name__} spells {own!r} itself"


def test_ras_reads_the_banner_through_the_grammar() -> None:
    facts = ras.parse_text("NCCL version 2.26.2+cuda12.8 compiled with CUDA 12.8\n")
    assert facts["nccl_version"] == "2.26.2"
    assert ras.parse_text("NCCL version\n")["nccl_version"] is None  # no release: nothing read, no crash
