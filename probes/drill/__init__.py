"""Onboarding drills: a small Gloo job with one real fault, run for real, its logs kept.

`catalog` holds the drills (fault, cause, culprit rank), `template` the job they modify,
`script` the files and commands of one drill, `run` the launch and cleanup (on the repro
runner's process tree), `store` which drills a learner has passed.
"""
from .catalog import DRILLS, HEALTHY, Drill, get
from .run import DrillError, DrillResult, check_request, run_drill

__all__ = ["DRILLS", "HEALTHY", "Drill", "DrillError", "DrillResult", "check_request", "get", "run_drill"]
