"""Why there is no Flight Recorder dump, per torch version: each reason fires on its own case and
a job with every switch right gets none (the silent twin); a hang under `run` says why on Gloo."""
from __future__ import annotations

import signal
from pathlib import Path

import pytest

from distdoctor.probes.flightrec.missing import why_no_dump

RIGHT_NEW = {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
             "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}
RIGHT_OLD = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}


def ids(torch: str, env: dict, **kw) -> list[str]:
    return [r["id"] for r in why_no_dump(torch, env, has_nccl=kw.pop("has_nccl", True), **kw)]


def test_every_switch_right_gives_no_reason(tmp_path: Path) -> None:
    assert ids("2.13.0", dict(RIGHT_NEW, TORCH_FR_DUMP_TEMP_FILE=f"{tmp_path}/rank_")) == []
    assert ids("2.6.0", dict(RIGHT_OLD, TORCH_NCCL_DEBUG_INFO_TEMP_FILE=f"{tmp_path}/rank_")) == []
    assert ids("2.13.0", dict(RIGHT_OLD)) == []  # 2.9+ still reads the old names


@pytest.mark.parametrize("torch,env,expected", [
    ("2.13.0", {}, "fr-buffer-off"),
    ("2.13.0", {"TORCH_FR_BUFFER_SIZE": "0"}, "fr-buffer-off"),
    ("2.6.0", {"TORCH_FR_BUFFER_SIZE": "2000"}, "fr-name-not-read"),
    ("2.6.0", dict(RIGHT_OLD, TORCH_FR_DUMP_TEMP_FILE="/tmp/x_"), "fr-name-not-read"),
    ("2.13.0", dict(RIGHT_NEW, TORCH_NCCL_DUMP_ON_TIMEOUT="0"), "fr-dump-on-timeout-off"),
    ("2.13.0", dict(RIGHT_NEW, TORCH_NCCL_ASYNC_ERROR_HANDLING="1"), "fr-async-not-3"),
    ("2.13.0", dict(RIGHT_NEW, TORCH_FR_DUMP_TEMP_FILE="/nonexistent/dd/rank_"), "fr-folder-missing"),
    ("2.4.0", RIGHT_OLD, "fr-buffer-off"),
])
def test_each_reason_fires_on_its_case(torch: str, env: dict, expected: str) -> None:
    assert expected in ids(torch, env)


def test_a_rank_killed_before_the_dump_and_a_gloo_job_are_named() -> None:
    assert "fr-killed-before-dump" in ids("2.13.0", RIGHT_NEW, exit_codes=[0, -signal.SIGKILL])
    assert ids("2.13.0", RIGHT_NEW, exit_codes=[-signal.SIGTERM]) == []
    gloo = why_no_dump("2.13.0", {"TORCH_FR_BUFFER_SIZE": "2000"}, has_nccl=False)
    assert [r["id"] for r in gloo] == ["fr-gloo-no-dump"] and "debug_server" in gloo[0]["fix"]
