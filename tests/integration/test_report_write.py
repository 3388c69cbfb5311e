"""Results and files never lost: a session that cannot be saved still prints the result, and
`report -o` on a full disk keeps the old report whole (real files, a real tiny tmpfs where the
test may mount one, else a read-only folder)."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from distdoctor.tui.record.session import SessionStore

DISTDOCTOR = Path(sys.executable).with_name("distdoctor")
# a failure the analysis answers (exit 1): NCCL's catch-all code alone is no answer, its last error is
LOG = ("[rank1]: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error, "
       "NCCL version 2.21.5\n[rank1]: Last error:\n[rank1]: Error while creating shared memory segment "
       "/dev/shm/nccl-Jd82Ks (size 9637888)\n[rank0]: still waiting\n")


def run_cli(*args: str, state: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    return subprocess.run([str(DISTDOCTOR), *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


@contextlib.contextmanager
def tiny_tmpfs(where: Path) -> Iterator[bool]:
    """A 64 KiB tmpfs at `where` (True), or False where this sandbox may not mount one."""
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        yield False
        return
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
                          capture_output=True, timeout=30)
    if done.returncode != 0:
        yield False
        return
    try:
        yield True
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def fill(directory: Path) -> None:
    """Use up every free byte of the filesystem holding `directory`."""
    for name, chunk in (("filler", 4096), ("filler2", 64)):  # then the last partial block
        fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(fd, b"\0" * chunk)
        except OSError:
            pass  # ENOSPC: full
        finally:
            os.close(fd)


@contextlib.contextmanager
def unwritable_dir(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """(a folder where no new file fits, why): a full tiny tmpfs when the test may mount one,
    else a read-only folder; skips where neither can be made (root without mount)."""
    where = tmp_path / f"mnt-{uuid.uuid4().hex[:6]}"
    with tiny_tmpfs(where) as mounted:
        if mounted:
            yield where, "full"
            return
        if os.geteuid() == 0:
            pytest.skip("root without mount: a read-only folder would not stop root")
        yield where, "read-only"


def make_unwritable(where: Path, kind: str) -> None:
    if kind == "full":
        fill(where)
    else:
        where.chmod(0o555)


def restore(where: Path, kind: str) -> None:
    if kind == "read-only":
        where.chmod(0o755)


# --- item 4: --session that cannot be written -------------------------------------------------

def test_result_is_printed_then_one_line_when_the_session_cannot_be_saved(tmp_path: Path) -> None:
    log = tmp_path / "rank1.log"
    log.write_text(LOG)
    plain = run_cli("logs", str(log), state=tmp_path / "plain-state")
    assert plain.returncode == 1 and "NCCL" in plain.stdout
    with unwritable_dir(tmp_path) as (where, kind):
        sessions = where / "distdoctor" / "sessions"
        sessions.mkdir(parents=True)
        make_unwritable(where, kind)
        try:
            out = run_cli("logs", str(log), "--session", "inc-1", state=where)
            as_json = run_cli("logs", str(log), "--json", "--session", "inc-1", state=where)
        finally:
            restore(where, kind)
    # the analysis's own exit code and its whole result, then one line naming the reason
    assert out.returncode == plain.returncode == 1, out.stderr
    assert out.stdout == plain.stdout
    why = "No space left on device" if kind == "full" else "Permission denied"
    # one line per thing not kept: the session, and the incident history in the same state folder
    lines = out.stderr.splitlines()
    assert 1 <= len(lines) <= 2 and "Traceback" not in out.stderr
    assert all(ln.startswith("distdoctor: ") for ln in lines)
    assert any(ln.startswith("distdoctor: the result was not saved to session inc-1: ") for ln in lines)
    assert why in out.stderr
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["causes"]
    assert why in as_json.stderr


@pytest.mark.parametrize("damage,word", [("{torn", "unreadable"),
                                         ('{"schema": 1, "id": "inc-1", "events": 3}', "damaged")])
def test_a_damaged_session_file_costs_nothing_but_one_line(tmp_path: Path, damage: str,
                                                          word: str) -> None:
    log = tmp_path / "rank1.log"
    log.write_text(LOG)
    state = tmp_path / "state"
    store = SessionStore(state / "distdoctor" / "sessions")
    store.directory.mkdir(parents=True)
    store.path("inc-1").write_text(damage)
    out = run_cli("logs", str(log), "--session", "inc-1", state=state)
    assert out.returncode == 1 and "NCCL" in out.stdout
    assert out.stderr.count("\n") == 1 and word in out.stderr
    assert store.path("inc-1").read_text() == damage  # never overwritten
    bad_id = run_cli("logs", str(log), "--session", "no way", state=state)
    assert bad_id.returncode == 1 and "NCCL" in bad_id.stdout and "bad session id" in bad_id.stderr


# --- item 5: report -o on a full disk -------------------------------------------------------------

def planted_session(state: Path, lines: int) -> None:
    store = SessionStore(state / "distdoctor" / "sessions")
    store.create("inc-1", host="node-17")
    evidence = [{"file": f"rank{i % 8}.log", "line": i, "text": f"step {i}: all reduce stalled {i}"}
                for i in range(lines)]
    store.append("inc-1", "logs", {"files_read": 8, "causes": [
        {"id": "rank-crash-deadlock", "score": 80, "evidence": evidence}]})


def test_report_on_a_full_disk_keeps_the_old_report_whole(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with unwritable_dir(tmp_path) as (where, kind):
        target = where / "incident.md"
        planted_session(state, 5)
        first = run_cli("report", "inc-1", "-o", str(target), state=state)
        assert first.returncode == 0, first.stderr
        good = target.read_text()
        assert "rank-crash-deadlock" in good
        planted_session(state, 3000)  # a much bigger report now: it cannot fit
        make_unwritable(where, kind)
        try:
            second = run_cli("report", "inc-1", "-o", str(target), state=state)
            left = sorted(p.name for p in where.iterdir())
        finally:
            restore(where, kind)
        assert second.returncode == 2 and "Traceback" not in second.stderr
        assert second.stderr.startswith(f"distdoctor: error: cannot write {target}")
        assert target.read_text() == good  # the old good report survives, byte for byte
        assert not [n for n in left if n.endswith(".tmp")]  # no temporary file left behind


def test_report_written_whole_with_the_usual_modes(tmp_path: Path) -> None:
    state = tmp_path / "state"
    planted_session(state, 5)
    target = tmp_path / "incident.md"
    target.write_text("old")
    assert run_cli("report", "inc-1", "-o", str(target), state=state).returncode == 0
    assert "rank-crash-deadlock" in target.read_text()
    assert (target.stat().st_mode & 0o777) == 0o666 & ~current_umask()
    assert run_cli("report", "inc-1", "--no-redact", "-o", str(target), state=state).returncode == 0
    assert (target.stat().st_mode & 0o777) == 0o600
    link = tmp_path / "latest.md"
    link.symlink_to(target)
    assert run_cli("report", "inc-1", "-o", str(link), state=state).returncode == 0
    assert link.is_symlink() and "rank-crash-deadlock" in target.read_text()
    devnull = run_cli("report", "inc-1", "-o", os.devnull, state=state)
    assert devnull.returncode == 0 and Path(os.devnull).is_char_device()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
