"""Runs probes concurrently under one deadline: a hung probe never stalls the rest."""
from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from .base import ERROR, Probe, ProbeContext, ProbeResult, unavailable


def run_sweep(ctx: ProbeContext, probes: Mapping[str, Probe], *, deadline: float = 8.0,
              on_result: Callable[[ProbeResult], None] | None = None) -> dict[str, ProbeResult]:
    """Run every probe in its own daemon thread; whatever has not answered by `deadline` seconds
    is reported unavailable with that reason. `on_result` is called as each one finishes."""
    done: queue.Queue[ProbeResult] = queue.Queue()

    def run(name: str, probe: Probe) -> None:
        start = time.monotonic()
        try:
            result = probe(ctx)
        except Exception as exc:  # a probe bug must become a finding, not a crash
            result = ProbeResult(name, ERROR, {}, reason=f"{type(exc).__name__}: {exc}")
        done.put(ProbeResult(name, result.status, result.facts, result.reason,
                             result.raw, time.monotonic() - start))

    for name, probe in probes.items():
        threading.Thread(target=run, args=(name, probe), daemon=True, name=f"probe-{name}").start()
    results: dict[str, ProbeResult] = {}
    end = time.monotonic() + deadline
    while len(results) < len(probes):
        try:
            result = done.get(timeout=max(0.0, end - time.monotonic()))
        except queue.Empty:
            break
        results[result.name] = result
        if on_result:
            on_result(result)
    for name in probes:
        if name not in results:
            results[name] = unavailable(name, f"timed out after {deadline:g}s")
            if on_result:
                on_result(results[name])
    return {name: results[name] for name in probes}


def select(registry: Mapping[str, Probe], only: Iterable[str] | None) -> dict[str, Probe]:
    """The probes named in `only` (all when empty); KeyError names the first unknown one."""
    names = list(only or registry)
    for name in names:
        if name not in registry:
            raise KeyError(name)
    return {name: registry[name] for name in names}
