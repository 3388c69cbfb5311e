"""`distdoctor fr` on hostile Flight Recorder dumps (issue 25, items 1, 2, 6 and 12): a SeqNum of
2**64, a list shared a billion times, a 15 MB ranks string, nesting 200k deep, integers past the
digit limit, lone surrogates and terminal control codes in names. Each runs the real CLI in a
subprocess: it ends, exits 1 or 2 with at most one line on stderr, never a traceback, never a raw
control code on stdout, under 300 MiB (measured: every case here peaks near 60 MiB, in well under
a second of its own time)."""
from __future__ import annotations

import json
import os
import pickle
import random
import struct
from pathlib import Path
from typing import Any

import pytest
from boundkit import run, sane

from distdoctor.knowledge.fswalk import walk
from distdoctor.knowledge.printable import clean, plain_text
from distdoctor.probes.flightrec import read_and_analyse, to_json

pytestmark = pytest.mark.slow

FR = Path(__file__).resolve().parents[1] / "fixtures" / "fr"


def base_doc(rank: int) -> dict[str, Any]:
    return json.loads((FR / "healthy" / "json" / f"trace_rank_{rank}.json").read_text())


def write_set(folder: Path, docs: dict[int, Any], fmt: str = "json") -> Path:
    folder.mkdir(exist_ok=True)
    for rank, doc in docs.items():
        if fmt == "json":
            data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
            (folder / f"trace_rank_{rank}.json").write_bytes(data)
        else:
            data = doc if isinstance(doc, bytes) else pickle.dumps(doc, protocol=4)
            (folder / f"trace_rank_{rank}").write_bytes(data)
    return folder


def shared_billion() -> list[Any]:
    """1.5 KB pickled, 10**9 elements when expanded by str()."""
    big: list[Any] = [1]
    for _ in range(9):
        big = [big] * 10
    return big


def fr(folder: Path, *extra: str) -> tuple[int, str]:
    rc, out, err, rss = run("fr", str(folder), *extra)
    sane(rc, out, err, rss, codes=(0, 1, 2))
    return rc, out


@pytest.mark.parametrize("seq", [2**64, 2**64 + 5, 10**19, 2**62, 2**63 - 1])
def test_a_seqnum_far_past_the_others_ends(tmp_path: Path, seq: int) -> None:
    docs = {r: base_doc(r) for r in range(3)}
    docs[1]["entries"][-1]["collective_seq_id"] = seq
    rc, out = fr(write_set(tmp_path / "d", docs))
    assert rc in (0, 1) and "Flight Recorder: 3 dumps" in out


def test_a_seqnum_of_6000_digits_in_a_pickle_ends(tmp_path: Path) -> None:
    docs = {r: base_doc(r) for r in range(3)}
    docs[2]["entries"][-1]["collective_seq_id"] = 10**6000
    docs[2]["pg_status"] = {"0": {"last_completed_collective": 10**6000}}
    rc, out = fr(write_set(tmp_path / "d", docs, "pickle"))
    assert rc in (0, 1) and "Flight Recorder: 3 dumps" in out


def test_an_integer_past_the_digit_limit_in_json_is_one_line(tmp_path: Path) -> None:
    docs: dict[int, Any] = {r: base_doc(r) for r in range(3)}
    docs[0] = json.dumps(docs[0]).replace('"collective_seq_id": 1', '"collective_seq_id": ' + "9" * 6000, 1).encode()
    rc, out, err, rss = run("fr", str(write_set(tmp_path / "d", docs)))
    sane(rc, out, err, rss, codes=(2,))
    assert "unreadable JSON dump" in err


@pytest.mark.parametrize("field", ["input_sizes", "output_sizes", "process_group", "state", "input_dtypes",
                                   "profiling_name", "frames"])
def test_a_list_shared_a_billion_times_is_not_expanded(tmp_path: Path, field: str) -> None:
    docs = {r: base_doc(r) for r in range(3)}
    for entry in docs[1]["entries"]:
        entry[field] = shared_billion()
    folder = write_set(tmp_path / "d", docs, "pickle")
    assert (folder / "trace_rank_1").stat().st_size < 8000
    rc, out = fr(folder)
    assert "Flight Recorder: 3 dumps" in out
    if field == "input_sizes":
        assert rc == 1 and "…" in out  # the mismatch is found, its text cut


def test_a_15_mb_ranks_string_is_not_evaluated(tmp_path: Path) -> None:
    docs = {r: base_doc(r) for r in range(3)}
    docs[0]["pg_config"] = {"": {"name": "", "desc": "", "ranks": "[" + "0, " * 5_000_000 + "0]"}}
    docs[1]["pg_config"] = {"": {"name": "", "desc": "", "ranks": "[" + "(" * 5_000_000}}
    rc, out = fr(write_set(tmp_path / "d", docs))
    assert "Flight Recorder: 3 dumps" in out


def deep_list_pickle(depth: int) -> bytes:
    """A dump whose one entry's input_sizes nests `depth` lists deep (pickle builds it without
    recursion: `depth` empty lists, then APPEND each into the one below)."""
    def text(s: str) -> bytes:
        raw = s.encode()
        return b"X" + struct.pack("<I", len(raw)) + raw
    entry = (b"}" + text("collective_seq_id") + b"K\x01s" + text("profiling_name") + text("gloo:all_reduce") + b"s"
             + text("process_group") + b"]" + text("0") + b"a" + text("default_pg") + b"as"
             + text("input_sizes") + b"]" * depth + b"a" * (depth - 1) + b"s")
    return b"\x80\x02}" + text("entries") + b"]" + entry + b"as."


def test_deep_input_sizes_are_cut_not_recursed(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    for r in range(2):
        (folder / f"trace_rank_{r}").write_bytes(deep_list_pickle(100_000 if r else 3))
    rc, out = fr(folder)
    assert rc == 1 and "size" in out


def test_json_nested_200k_deep_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "trace_rank_0.json").write_text('{"entries": [' + "[" * 200_000 + "]" * 200_000 + "]}")
    rc, out, err, rss = run("fr", str(folder))
    sane(rc, out, err, rss, codes=(2,))
    assert "unreadable JSON dump" in err


def test_a_lone_surrogate_and_control_codes_in_names_print_as_escapes(tmp_path: Path) -> None:
    docs = {r: base_doc(r) for r in range(3)}
    docs[1]["entries"][-1]["profiling_name"] = "gloo:all_\ud800reduce\x1b]0;owned\x07\x1b[2J"
    for entry in docs[2]["entries"]:
        entry["process_group"] = ["0\x1b[2J\nculprit: none", "default_pg\x9b31m"]
    rc, out = fr(write_set(tmp_path / "d", docs))
    assert rc == 1
    assert "\\x1b" in out and "\\ud800" in out and "\nculprit: none" not in out
    rc, out = fr(tmp_path / "d", "--json")
    json.loads(out)


def test_a_rank_number_too_large_is_not_a_world(tmp_path: Path) -> None:
    docs = {r: base_doc(r) for r in range(2)}
    folder = write_set(tmp_path / "d", docs)
    (folder / ("trace_rank_" + "9" * 200 + ".json")).write_text(json.dumps(base_doc(2)))
    (folder / "trace_rank_99999999.json").write_text(json.dumps(base_doc(2)))
    rc, out = fr(folder)
    assert "ranks 0-1" in out or "ranks 0, 1" in out


def deep_folder(top: Path, depth: int) -> Path:
    """top/a/a/.../a, `depth` deep (made one level at a time: pathlib's mkdir recurses)."""
    path = top
    path.mkdir()
    for _ in range(depth):
        path = path / "a"
        os.mkdir(path)
    return path


def remove_deep(top: Path) -> None:
    """Remove what deep_folder made, bottom up (shutil.rmtree recurses once per level, and
    pytest's clean-up of old temporary folders would print its RecursionError)."""
    folders = []
    for root, _dirs, files in walk(top):
        folders.append(root)
        for name in files:
            os.unlink(os.path.join(root, name))
    for folder in reversed(folders):
        os.rmdir(folder)


def test_a_folder_1000_deep_is_walked(tmp_path: Path) -> None:
    deep = tmp_path / "d"
    path = deep_folder(deep, 1000)
    try:
        write_set(path, {r: base_doc(r) for r in range(3)})
        rc, out = fr(deep)
        assert rc == 0 and "Flight Recorder: 3 dumps" in out
    finally:
        remove_deep(deep)


# ---- a seeded family, in process: every hostile value in every field ----------------------

HOSTILE: list[Any] = [2**64, -1, 10**30, 1e308, float("nan"), None, True, "", "x" * 100_000,
                      "\x1b]0;t\x07", "\ud800", [[]], [[1] * 10_000], {"a": 1}, (1, 2), b"\x00\xff",
                      shared_billion(), "[" * 50, 3.5, [{"name": "\x1b[2J"}]]
FIELDS = ["collective_seq_id", "input_sizes", "output_sizes", "process_group", "profiling_name", "state",
          "input_dtypes", "output_dtypes", "is_p2p", "p2p_seq_id", "retired", "time_created_ns", "frames"]


@pytest.mark.parametrize("seed", range(12))
def test_seeded_hostile_fields(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    docs = {r: base_doc(r) for r in range(3)}
    for _ in range(8):
        doc = docs[rng.randrange(3)]
        entry = rng.choice(doc["entries"])
        entry[rng.choice(FIELDS)] = rng.choice(HOSTILE)
    docs[rng.randrange(3)]["pg_config"] = {rng.choice(["", "0", "\x1b"]): {"name": rng.choice(HOSTILE[6:]),
                                                                             "ranks": rng.choice(HOSTILE)}}
    docs[rng.randrange(3)]["pg_status"] = {"0": {"last_completed_collective": rng.choice(HOSTILE)}}
    folder = write_set(tmp_path / "d", docs, "pickle")
    result = read_and_analyse([str(folder)])
    from distdoctor.tui.commands.fr import render
    text = clean(render(result, [str(folder)], []).replace("\n", " "), 10**7)
    assert "\\x1b" not in text or "\x1b" not in text
    json.dumps(to_json(result))
    assert len(text) < 200_000


def test_plain_text_matches_str_on_plain_data() -> None:
    for value in ([[4]], [[1024, 1024], [3]], (1,), {"a": [1, 2]}, [], [1.5, None, True], "s"):
        assert plain_text(value) == str(value)
    cycle: list[Any] = [1]
    cycle.append(cycle)
    assert plain_text(cycle) == "[1, [...]]"
    assert len(plain_text(shared_billion(), 100)) <= 101
