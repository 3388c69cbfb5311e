"""`distdoctor repro` (placeholder until its issue lands)."""
from __future__ import annotations

import argparse

from ..cli import UsageError
from .common import add_common


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("repro", help="repro (not built yet)")
    add_common(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise UsageError("repro is not built yet")
