"""Reading logs: bad inputs are skipped and listed, compressed and piped input streams, memory stays flat."""
from __future__ import annotations

import bz2
import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.logs import analyse, read_context, sources

KB = load_knowledge(use_env=False)
OOM = "[rank1]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
REPO = Path(__file__).resolve().parents[2]
# `python -m distdoctor.tui.cli` would load cli.py twice (as __main__ and as the module the
# commands import), so its UsageError would not be caught: call main() instead.
DISTDOCTOR = [sys.executable, "-c", "import sys; from distdoctor.tui.cli import main; sys.exit(main())"]


def reasons(report) -> dict[str, str]:
    return {Path(s["path"]).name: s["reason"] for s in report.skipped}


def test_bad_inputs_are_skipped_and_listed(tmp_path: Path) -> None:
    (tmp_path / "good.log").write_text("hello\n" + OOM)
    (tmp_path / "binary.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00" + os.urandom(4096))
    (tmp_path / "latin1.log").write_bytes("température élevée\n".encode("latin-1") * 10)
    (tmp_path / "empty.log").write_bytes(b"")
    rep = analyse([str(tmp_path), str(tmp_path / "missing.log")], KB)
    why = reasons(rep)
    # Latin-1 text is text: read with U+FFFD for the bad bytes, and a note says so
    assert rep.files_read == 2 and "latin1.log" not in why
    assert any("latin1.log" in n and "UTF-8" in n for n in rep.notes)
    assert "binary" in why["binary.bin"]
    assert why["empty.log"] == "empty file"
    assert "No such file" in why["missing.log"]
    assert [c.id for c in rep.causes][:1] == ["cuda-oom"]


def test_a_100mb_single_line_is_skipped_without_reading_it_whole(tmp_path: Path) -> None:
    big = tmp_path / "one-line.log"
    with open(big, "wb") as fh:
        chunk = b"x" * (1 << 20)
        for _ in range(100):
            fh.write(chunk)
    (tmp_path / "ok.log").write_text(OOM)
    rep = analyse([str(big), str(tmp_path / "ok.log")], KB)
    assert "one huge line" in reasons(rep)["one-line.log"]
    assert rep.files_read == 1 and rep.bytes_read == len(OOM)


def test_a_log_that_opens_with_progress_bars_is_read(tmp_path: Path) -> None:
    # tqdm redraws with \r alone: 2 MB with no \n was once skipped as "one huge line", and the
    # OOM after it with it
    path = tmp_path / "train.log"
    path.write_bytes(b"\r 42%|####| 420/1000 [00:10<00:14, 41.2it/s]" * 50_000 + b"\n" + OOM.encode())
    rep = analyse([str(path)], KB)
    assert rep.files_read == 1 and not rep.skipped
    assert [c.id for c in rep.causes][:1] == ["cuda-oom"]


def test_long_lines_inside_a_file_are_cut_not_loaded(tmp_path: Path) -> None:
    path = tmp_path / "progress.log"
    with open(path, "wb") as fh:
        fh.write(b"start\n")
        fh.write(b"Epoch 1: " + b"\r 42%|####| 420/1000" * 300_000)  # tqdm without newlines: ~6 MB
        fh.write(b"\r[E ProcessGroupNCCL.cpp:828] [Rank 1] Watchdog caught collective operation timeout: "
                 b"WorkNCCL(SeqNum=3, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800412 milliseconds\n")
        fh.write(OOM.encode())
    rep = analyse([str(path)], KB)
    assert any("longer than" in n for n in rep.notes)
    hits = {e.signature: e.line for c in rep.causes for e in c.evidence}
    assert hits["watchdog-timeout"] == 2 and hits["cuda-oom-torch"] == 3
    assert rep.ranks["1"]["last_collective"]["seq"] == 3


def test_unreadable_paths(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text(OOM)
    os.mkfifo(tmp_path / "pipe.log")
    rep = analyse([str(tmp_path / "a.log" / "inner.log"), str(tmp_path / "pipe.log"), str(tmp_path / "a.log")], KB)
    assert rep.files_read == 1
    assert "Not a directory" in reasons(rep)["inner.log"]
    assert reasons(rep)["pipe.log"] == "not a regular file"


def test_file_without_read_permission(tmp_path: Path) -> None:
    path = tmp_path / "secret.log"
    path.write_text(OOM)
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running as root: permissions do not stop reads")
        rep = analyse([str(path)], KB)
        assert rep.files_read == 0 and "Permission denied" in reasons(rep)["secret.log"]
    finally:
        path.chmod(0o600)


@pytest.mark.parametrize("opener,suffix", [(gzip.open, ".gz"), (bz2.open, ".bz2")])
def test_compressed_logs_stream(tmp_path: Path, opener, suffix: str) -> None:
    path = tmp_path / f"rank1.log{suffix}"
    with opener(path, "wt") as fh:
        fh.write("noise\n" * 1000 + OOM)
    rep = analyse([str(path)], KB)
    assert rep.files_read == 1 and rep.bytes_read == 6000 + len(OOM)
    ev = rep.causes[0].evidence[0]
    assert (ev.line, ev.rank) == (1001, "1")
    assert read_context(str(path), 1001, 1, 1) == [(1000, "noise"), (1001, OOM.strip()), ]


def test_damaged_compressed_files(tmp_path: Path) -> None:
    good = gzip.compress((OOM + "".join(f"line {i}\n" for i in range(200000))).encode())
    (tmp_path / "cut.log.gz").write_bytes(good[: len(good) // 2])
    (tmp_path / "header.log.gz").write_bytes(b"\x1f\x8b" + b"garbage" * 10)
    rep = analyse([str(tmp_path / "cut.log.gz"), str(tmp_path / "header.log.gz")], KB)
    # the part before the damage is used, and the note says where reading stopped
    assert rep.files_read == 1 and [c.id for c in rep.causes][:1] == ["cuda-oom"]
    assert any("cut.log.gz: stopped reading" in n for n in rep.notes)
    assert "unreadable gzip data" in reasons(rep)["header.log.gz"]


def test_globs_and_directories(tmp_path: Path) -> None:
    for r in range(3):
        sub = tmp_path / f"node{r}"
        sub.mkdir()
        (sub / f"rank{r}.log").write_text("ok\n")
    (tmp_path / "node2" / "rank2.log").write_text(OOM.replace("rank1", "rank2"))
    rep = analyse([str(tmp_path / "node*" / "rank*.log")], KB)
    assert rep.files_read == 3 and rep.first_failure and rep.first_failure.rank == "2"
    rep = analyse([str(tmp_path / "nothing-*.log")], KB)
    assert rep.files_read == 0 and rep.skipped[0]["reason"] == "no file matches this pattern"


def test_line_numbers_across_blocks_and_read_context(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    n = 200_000  # ~10 MB: several 4 MiB blocks
    with open(path, "w") as fh:
        for i in range(1, n + 1):
            fh.write(f"line {i:07d} node3:4101:4160 [1] NCCL INFO AllReduce: opCount {i:x} count 1024\n")
            if i == 123_457:
                fh.write(OOM)
    rep = analyse([str(path)], KB)
    ev = next(e for c in rep.causes for e in c.evidence if e.signature == "cuda-oom-torch")
    assert ev.line == 123_458
    ctx = read_context(str(path), ev.line, before=2, after=1)
    assert [n for n, _ in ctx] == [123_456, 123_457, 123_458, 123_459]
    assert ctx[2][1] == OOM.strip() and ctx[1][1].startswith("line 0123457")


def test_stdin(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    res = subprocess.run([*DISTDOCTOR, "logs", "-", "--json"],
                         input=("ok\n" * 10 + OOM).encode(), capture_output=True, timeout=60, env=env, check=False)
    assert res.returncode == 1, res.stderr
    assert b'"cuda-oom"' in res.stdout and b"<stdin>" in res.stdout
    res = subprocess.run([*DISTDOCTOR, "logs", "-"],
                         input=b"\x00\x01\x02binary", capture_output=True, timeout=60, env=env, check=False)
    assert res.returncode == 2 and b"binary" in res.stderr and b"Traceback" not in res.stderr


def test_sniff_accepts_a_multibyte_char_cut_by_the_window() -> None:
    text = ("é" * (sources.SNIFF // 2)).encode()[: sources.SNIFF - 1]
    assert sources.sniff(text) == ""
    assert sources.sniff(b"ok\n\xff\xfe bad\n") == ""  # one bad byte is not a binary file
    assert "UTF-8" in sources.not_utf8(b"ok\n\xff\xfe bad\n")


def test_fifo_loop_and_broken_gzip_are_skipped_without_blocking(tmp_path: Path) -> None:
    # a FIFO with no writer would block a read forever: it must be skipped unopened
    os.mkfifo(tmp_path / "pipe.log")
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    (tmp_path / "cut.gz").write_bytes(gzip.compress(b"hello\n" * 1000)[:20])
    (tmp_path / "fake.gz").write_bytes(b"\x1f\x8bnot really gzip at all\n")
    (tmp_path / "good.log").write_text(OOM)
    report = analyse([str(tmp_path)], KB)
    why = reasons(report)
    assert report.files_read == 1 and report.causes[0].id == "cuda-oom"
    assert why["pipe.log"] == "not a regular file"
    assert "symbolic links" in why["loop1"] and "symbolic links" in why["loop2"]
    assert why["cut.gz"].startswith("unreadable gzip data") and why["fake.gz"].startswith("unreadable gzip")


def test_zero_size_files_are_skipped_before_any_read(tmp_path: Path, monkeypatch) -> None:
    # /proc and /sys hold zero-size files whose read blocks (kmsg): size 0 is decided from stat
    (tmp_path / "empty.log").write_bytes(b"")

    def no_open(*args, **kwargs):
        raise AssertionError(f"opened {args[0]}")

    monkeypatch.setattr(sources, "open", no_open, raising=False)
    src, why = sources.vet(str(tmp_path / "empty.log"))
    assert src is None and why == "empty file"


def test_a_link_that_cannot_be_resolved_is_skipped_not_a_traceback(tmp_path: Path,
                                                                  monkeypatch) -> None:
    # realpath() of /proc/1/cwd raises PermissionError in a container: the walk must go on
    (tmp_path / "good.log").write_text(OOM)
    (tmp_path / "other.log").write_text(OOM)
    real = os.path.realpath

    def picky(path, *args, **kwargs):
        if str(path).endswith("other.log"):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(sources.os.path, "realpath", picky)
    report = analyse([str(tmp_path)], KB)
    assert report.files_read == 2 and report.causes[0].id == "cuda-oom"


def test_stdin_on_a_terminal_is_an_error_not_a_wait(tmp_path: Path) -> None:
    master, slave = os.openpty()
    try:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        res = subprocess.run([*DISTDOCTOR, "logs", "-"], stdin=slave, capture_output=True,
                             text=True, timeout=60, env=env, check=False)
    finally:
        os.close(slave)
        os.close(master)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith("distdoctor: error: - reads standard input, which is a terminal")
    assert res.stderr.count("\n") == 1
