"""extract.utc_seconds is calendar.timegm for the dates a log line can spell (\\d{4}-\\d\\d-\\d\\d)."""
from __future__ import annotations

import calendar

import pytest

from distdoctor.knowledge.logs.extract import timestamp, utc_seconds


def _timegm(*t: int) -> int | type[Exception]:
    try:
        return calendar.timegm(t)
    except ValueError as e:
        return type(e)


def _ours(*t: int) -> int | type[Exception]:
    try:
        return utc_seconds(*t)
    except ValueError as e:
        return type(e)


@pytest.mark.parametrize("year", [0, 1, 2, 4, 99, 100, 400, 1600, 1700, 1900, 1969, 1970, 1999, 2000, 2024,
                                  2026, 2100, 2400, 9998, 9999])
def test_same_as_timegm_on_every_month_and_odd_days(year: int) -> None:
    for month in range(0, 14):  # 0 and 13: timegm's ValueError
        for day in (0, 1, 28, 29, 30, 31, 99):  # timegm checks no day
            for clock in ((0, 0, 0), (23, 59, 60), (99, 99, 99)):
                assert _ours(year, month, day, *clock) == _timegm(year, month, day, *clock)


def test_a_log_line_reads_the_same_seconds() -> None:
    assert timestamp("2026-12-02 11:02:27,475 rank0 ...") == (2, calendar.timegm((2026, 12, 2, 11, 2, 27)) + 0.475)
    assert timestamp("0000-01-01 00:00:00 year zero") is None
    assert timestamp("2026-13-01 00:00:00 month 13") is None
