"""`distdoctor drill`: being built (placeholder so the command table stays whole)."""
from __future__ import annotations

import argparse

from ..cli import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("drill", help="(being built)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise UsageError("drill: not built yet")
