"""How a run's end is judged when the output alone must decide (no processes needed)."""
from __future__ import annotations

from distdoctor.probes.repro.judge import judge

DONE = "DISTDOCTOR_STEP done rank=0\nDISTDOCTOR_STEP done rank=1\n"


def test_a_slow_exit_after_every_rank_finished_is_a_pass_not_a_hang() -> None:
    # seen on a loaded 2-core machine: both ranks printed done, torchrun was still shutting
    # down when a 5 s timeout fired, and the repro said HANG
    verdict = judge(DONE, None, "timeout", 2)
    assert (verdict.outcome, verdict.stuck_at, verdict.first_error) == ("pass", "exit", "")
    assert verdict.exit_codes == {"launcher": None, "ranks": {}}  # killed: no codes to claim


def test_a_timeout_before_every_rank_finished_is_a_hang() -> None:
    verdict = judge("DISTDOCTOR_STEP done rank=0\nDISTDOCTOR_STEP barrier rank=1\n", None, "timeout", 2)
    assert verdict.outcome == "hang" and verdict.stuck_at


def test_a_stop_is_a_stop_even_after_every_rank_finished() -> None:
    assert judge(DONE, None, "cancelled", 2).outcome == "stopped"
