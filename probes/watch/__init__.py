"""Catch a hang as it happens: sample every rank's progress (log growth, CPU time, stack
samples), confirm a hang or a failure, capture the evidence at onset (stacks, Flight Recorder
dumps, RAS, per-rank logs) and conclude (`distdoctor run`, `distdoctor watch`)."""
from __future__ import annotations

from .launch import LaunchPlan, plan_launch
from .progress import Progress, RankView
from .watcher import Outcome, WatchConfig, watch_job

__all__ = ["LaunchPlan", "Outcome", "Progress", "RankView", "WatchConfig", "plan_launch", "watch_job"]
