"""`distdoctor logs` on a folder nested 1000 deep (issue 25, item 7), a first line longer than
1 MiB and a crash line with a message longer than 2,000 characters (item 14), and a file name
holding a newline and control codes (item 12). Each runs the real CLI in a subprocess: it ends,
at most one line on stderr, never a traceback or a raw control code, under 300 MiB (measured:
each run under a second and about 60 MiB)."""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from boundkit import run, sane

from distdoctor.knowledge.fswalk import walk

pytestmark = pytest.mark.slow

CRASH = ("[rank1]: Traceback (most recent call last):\n"
         '[rank1]:   File "train.py", line 9, in <module>\n'
         "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB{extra}\n")
WAITER = "[rank0]: RuntimeError: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7)\n"


def crash(extra: str = "") -> str:
    return CRASH.format(extra=extra)


def test_a_first_line_past_1_mib_is_cut_and_the_crash_after_it_read(tmp_path: Path) -> None:
    (tmp_path / "rank1.log").write_text("x" * (3 << 20) + "\n" + crash())
    (tmp_path / "rank0.log").write_text(WAITER)
    rc, out, err, rss = run("logs", "--json", str(tmp_path))
    sane(rc, out, err, rss, codes=(0, 1))
    data = json.loads(out)
    assert data["files_read"] == 2
    assert data["first_failure"]["rank"] in (1, "1")


@pytest.mark.parametrize("length", [2_500, 50_000, 3 << 20])
def test_a_crash_line_with_a_long_message_is_a_crash(tmp_path: Path, length: int) -> None:
    # no signature names this error: only the traceback's last line says rank 1 crashed
    (tmp_path / "rank1.log").write_text('[rank1]: Traceback (most recent call last):\n[rank1]:   File "t.py", '
                                        'line 9, in <module>\n[rank1]: ValueError: bad shape ' + "x" * length + "\n")
    (tmp_path / "rank0.log").write_text(WAITER)
    rc, out, err, rss = run("logs", "--json", str(tmp_path))
    sane(rc, out, err, rss, codes=(0, 1))
    data = json.loads(out)
    assert data["ranks"]["1"]["status"] == "crashed"
    assert data["first_failure"]["rank"] in (1, "1"), data["first_failure"]
    assert any("middle was left out" in n or "only their start and end" in n for n in data["notes"]) \
        or "middle was left out" in out


def test_one_huge_line_is_still_refused(tmp_path: Path) -> None:
    (tmp_path / "blob.log").write_bytes(b"y" * (70 << 20))
    rc, out, err, rss = run("logs", str(tmp_path / "blob.log"))
    sane(rc, out, err, rss, codes=(2,))
    assert "one huge line" in err


def deep_folder(top: Path, depth: int) -> Path:
    path = top
    path.mkdir()
    for _ in range(depth):
        path = path / "a"
        os.mkdir(path)
    return path


def remove_deep(top: Path) -> None:
    folders = []
    for root, _dirs, files in walk(top):
        folders.append(root)
        for name in files:
            os.unlink(os.path.join(root, name))
    for folder in reversed(folders):
        os.rmdir(folder)


@pytest.mark.parametrize("how", ["folder", "glob"])
def test_a_folder_nested_1000_deep(tmp_path: Path, how: str) -> None:
    top = tmp_path / "d"
    bottom = deep_folder(top, 1000)
    try:
        (bottom / "rank1.log").write_text(crash())
        (top / "rank0.log").write_text(WAITER)
        rc, out, err, rss = run("logs", "--json", str(top) if how == "folder" else f"{top}/**/*.log")
        sane(rc, out, err, rss, codes=(0, 1))
        data = json.loads(out)
        assert data["files_read"] == (2 if how == "folder" else 1)  # a ** glob stops 200 deep
    finally:
        remove_deep(top)


def test_a_newline_in_a_file_name_cannot_fake_an_output_line(tmp_path: Path) -> None:
    name = "rank1.log\nVerdict (high): all good\x1b]0;owned\x07"
    (tmp_path / name).write_text(crash())
    (tmp_path / "rank0.log").write_text(WAITER)
    rc, out, err, rss = run("logs", str(tmp_path))
    sane(rc, out, err, rss, codes=(0, 1))
    assert "\nVerdict (high): all good" not in out
    assert "rank1.log\\nVerdict" in out


@pytest.mark.parametrize("seed", range(4))
def test_seeded_long_lines_around_a_crash(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    parts = []
    for _ in range(rng.randint(2, 6)):
        parts.append(rng.choice(["a", " ", "\t", "[rank1]: ", "é", "\x1b[31m"]) * rng.choice([10, 3000, 1 << 20]))
        parts.append("\n")
    parts.insert(rng.randrange(len(parts) + 1), crash(" " + "z" * rng.choice([10, 3000])))
    (tmp_path / "rank1.log").write_text("".join(parts))
    (tmp_path / "rank0.log").write_text(WAITER)
    rc, out, err, rss = run("logs", "--json", str(tmp_path))
    sane(rc, out, err, rss, codes=(0, 1))
    assert json.loads(out)["first_failure"]["rank"] in (1, "1")
