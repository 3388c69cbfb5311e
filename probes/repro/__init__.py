"""Minimal repro and one-switch bisection, run for real with the target interpreter's torchrun."""
from __future__ import annotations

from .bisect import (
                     BisectResult,
                     BisectRun,
                     Trial,
                     candidate_interfaces,
                     find_switch,
                     plan,
                     run_bisect,
                     trials,
)
from .judge import STEPS, parse_steps
from .options import (
                     PythonInfo,
                     ReproInputError,
                     ReproOptions,
                     check_python,
                     default_python,
                     parse_env,
                     validate,
)
from .run import ReproResult, run_repro, runs_root
from .script import manual_commands, routable_address, script_text

__all__ = ["STEPS", "BisectResult", "BisectRun", "PythonInfo", "ReproInputError", "ReproOptions",
           "ReproResult", "Trial", "candidate_interfaces", "check_python", "default_python",
           "find_switch", "manual_commands", "parse_env", "parse_steps", "plan", "routable_address",
           "run_bisect", "run_repro", "runs_root", "script_text", "trials", "validate"]
