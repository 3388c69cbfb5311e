"""The exit-code rule every `distdoctor` command follows, written once.

- OK (0): nothing wrong was found. This includes "could not look": a probe or a command whose
  source is unavailable on this node (no NVIDIA driver, no GPU) prints one `unavailable: ...`
  line and exits 0, because a missing tool is neither a problem in the job nor bad usage.
- A diagnosis that cannot name a cause ("unknown": not enough evidence, what to collect next is
  said) is no answer: OK, even when the logs show a failure.
- PROBLEM (1): a problem was found: a failed check, a cause in the logs (confirmed or likely), a failing repro, a
  bisection whose baseline failed (whether or not a switch then fixed it), missing P2P, a node
  that differs from the fleet, a lint finding.
- USAGE (2): bad usage or unreadable input (garbage, binary, truncated or missing files); raised
  as `UsageError` (one line on stderr, never a traceback).
- A run stopped by a signal exits 128 + the signal number (130 for Ctrl-C), as shells do.
"""
from __future__ import annotations

OK = 0
PROBLEM = 1
USAGE = 2

RULE = "exit codes: 0 nothing wrong (or not available here), 1 a problem was found, 2 bad usage or unreadable input."


def problem_if(found: bool) -> int:
    """PROBLEM when `found`, else OK."""
    return PROBLEM if found else OK
