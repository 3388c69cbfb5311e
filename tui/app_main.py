"""Starts the Textual app; textual is imported only here, after the command line is parsed."""
from __future__ import annotations

import argparse


def run_app(args: argparse.Namespace) -> int:
    from .cli import UsageError

    raise UsageError("the app is not built yet")
