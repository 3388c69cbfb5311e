"""Failure signatures (issue 27): the same failure on another port, path, host or rank has the
same signature; a different failure, however alike, has another. Lines are real ones, read
from the recorded sets."""
from __future__ import annotations

from pathlib import Path

import pytest

from distdoctor.tui.record.history.signature import normalise, signature

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _line(rel: str, contains: str) -> str:
    """The first line of a recorded file holding `contains`: tests use real lines."""
    for line in (FIXTURES / rel).read_text(encoding="utf-8").splitlines():
        if contains in line:
            return line
    raise AssertionError(f"{contains!r} not in {rel}")


def test_the_same_failure_on_other_ports_has_one_signature() -> None:
    # EADDRINUSE, recorded twice on different days, on ports 56039 and 55825
    a = _line("recorded/07-drill-port-in-use/logs/console.log", "EADDRINUSE")
    b = _line("fresh/recorded/env-two-jobs-same-master-port/logs/job-b.log", "EADDRINUSE")
    assert a != b
    assert signature(a) == signature(b)


def test_the_same_failure_on_other_ranks_and_ports_has_one_signature() -> None:
    # gloo's "Connection closed by peer" seen by rank 1 of one job and rank 2 of another
    a = _line("recorded/05-drill-uneven-data/logs/console.log", "Connection closed by peer")
    b = _line("fresh/recorded/env-4ranks-barrier-stall/logs/rank2.log", "[rank2]: RuntimeError")
    assert "rank1" in a and "rank2" in b
    assert signature(a)[0] == signature(b)[0]


def test_paths_hosts_addresses_and_timestamps_go() -> None:
    line = ("node-17:4101:4101 [3] NCCL WARN NET/IB : Got async event : port error on "
            "gpu-a100-03.cluster.local:29500 at 0x7f3a2b, see /var/log/nccl/rank-3.log")
    other = ("gpu-b7:977:977 [0] NCCL WARN NET/IB : Got async event : port error on "
             "gpu-h100-11.cluster.local:29400 at 0x55aa01, see /tmp/x/rank-0.log")
    assert normalise(line) == normalise(other) == (
        "NCCL WARN NET/IB : Got async event : port error on <host> at <hex>, see rank-<n>.log")


def test_a_path_and_a_bare_file_name_agree() -> None:
    a = "[default1]:[rank1]: ValueError: Corrupted record in shard-00001.bin at offset 147456"
    b = "[default3]:[rank3]: ValueError: Corrupted record in /mnt/ds/run-12/shard-00007.bin at offset 5"
    assert signature(a) == signature(b)


def test_known_hosts_are_normalised_even_without_digits() -> None:
    assert normalise("lost connection to login", hosts=["login"]) == "lost connection to <host>"


@pytest.mark.parametrize("a, b", [
    # silent twins: alike in shape, different failures
    ("RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:47510.",
     "RuntimeError: [pair.cc:537] Read error [127.0.0.1]:25508: Connection reset by peer."),
    ("ValueError: Corrupted record in shard-00001.bin at offset 147456",
     "RuntimeError: bad batch at step 5: NaN in input features"),
    ("[E1201 04:50:17.1 socket.cpp:1028] The client socket has timed out after 10000ms while trying to connect",
     "[E1201 04:50:17.1 socket.cpp:1028] The server socket has failed to listen on any local network address"),
])
def test_different_failures_keep_different_signatures(a: str, b: str) -> None:
    assert signature(a)[0] != signature(b)[0]


def test_a_launchers_generic_line_is_told_apart_by_the_cause() -> None:
    line = _line("recorded/02-drill-silent-exit/logs/console.log", "failed (exitcode")
    assert signature(line, "rank-crash-deadlock")[0] != signature(line, "rank0-overload")[0]
    # a specific line is the same failure whatever cause ranks first today
    specific = _line("recorded/07-drill-port-in-use/logs/console.log", "EADDRINUSE")
    assert signature(specific, "master-addr-port") == signature(specific, "rank-env-mismatch")


def test_no_line_and_no_cause_is_no_signature() -> None:
    assert signature(None) == ("", "")
    assert signature("   ") == ("", "")
