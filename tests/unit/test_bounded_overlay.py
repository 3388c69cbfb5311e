"""Overlay safety (issue 11): log patterns that backtrack catastrophically are refused, the
packaged ones pass both the static and the timed check, and knowledge files are bounded."""
from __future__ import annotations

from pathlib import Path

import pytest

from distdoctor.knowledge import KnowledgeError, load_knowledge, regex_guard

KB = load_knowledge(use_env=False)

CATASTROPHIC = [
    r"(a+)+$", r"(\w+\s?)+$", r"(.*,)+X", r"(?:\d+)*x", r"^(([a-z])+.)+[A-Z]([a-z])+$",
    r"(x+x+)+y", r"NCCL WARN (.+)+ failed", r"(a*)*b", r"(?:x|xx|xxx)+y",
    r"(a|aa)+$", r"(a|a)*b",  # these two only the timed run catches (sre factors the branches)
]
LINEAR = [
    r"lib(?:cudart|nccl)\.so\.\d+(?:\.\d+)*: cannot", r"(\w+\s)+end", r"SeqNum=(\d+)",
    r"(?:ab)+c", r"\d{1,3}(?:\.\d{1,3}){3}", r"(?:\w+\.)+py", r"x.*y.*z", r"(\w|\d)+!",
]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(regex_guard.Unsafe, match="catastrophic backtracking"):
        regex_guard.check(pattern)


@pytest.mark.parametrize("pattern", LINEAR)
def test_ordinary_patterns_pass(pattern: str) -> None:
    regex_guard.check(pattern)  # raises if refused


def test_every_packaged_pattern_passes_the_timed_check() -> None:
    patterns = [s.pattern for s in KB.signatures.values()] + [h.pattern for h in KB.harmless.values()]
    assert len(patterns) > 50
    for pattern in patterns:
        regex_guard.check(pattern, timed=True)


def overlay(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "site.toml").write_text(text)
    return folder


def test_an_overlay_check_that_matches_is_timed_too(tmp_path: Path) -> None:
    check = next(iter(KB.checks.values()))
    text = (f'[[check]]\nid = "site-slow"\nprobe = "{check.probe}"\nfact = "{check.fact}"\n'
            f'op = "matches"\nvalue = "x(a|aa)+$"\nstatus = "warn"\ntitle = "t"\ndetail = "d"\n'
            f'cause_ids = []\n')
    with pytest.raises(KnowledgeError) as err:
        load_knowledge(overlay(tmp_path, text), use_env=False)
    assert err.value.key == "check.site-slow.value" and "site.toml" in err.value.file
    assert "catastrophic backtracking" in err.value.reason


def test_a_huge_integer_in_an_overlay_is_one_line(tmp_path: Path) -> None:
    text = '[[signature]]\nid = "x"\npattern = "boom"\ncause = "other"\nweight = ' + "9" * 5000 + "\n"
    with pytest.raises(KnowledgeError) as err:
        load_knowledge(overlay(tmp_path, text), use_env=False)
    assert "invalid TOML" in str(err.value) and "\n" not in str(err.value)
