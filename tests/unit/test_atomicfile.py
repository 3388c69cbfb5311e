"""The one atomic file writer (knowledge/atomicfile.py): old or new content, never half, no litter."""
from __future__ import annotations

import stat
from pathlib import Path

import pytest

from distdoctor.knowledge.atomicfile import write_atomic


def test_replaces_the_file_with_the_mode_asked_and_leaves_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "metrics.prom"
    target.write_text("old", encoding="utf-8")
    write_atomic(target, "new", mode=0o644, durable=True)
    assert target.read_text(encoding="utf-8") == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.prom"]


def test_default_mode_is_private(tmp_path: Path) -> None:
    target = tmp_path / "map.json"
    write_atomic(target, "{}")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary_one(tmp_path: Path) -> None:
    target = tmp_path / "session.json"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(target, "half \ud800 written")  # a lone surrogate fails mid-write
    assert target.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["session.json"]
    write_atomic(target, "kept \ud800", errors="surrogatepass")  # the cache's choice
    assert target.read_bytes() == "kept \ud800".encode("utf-8", "surrogatepass")


def test_a_missing_folder_raises_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "gone" / "b.json", "{}")
    assert list(tmp_path.iterdir()) == []
