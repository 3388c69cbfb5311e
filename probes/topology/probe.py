"""The `topology` probe: live NVML first, `nvidia-smi topo` through the injected runner as fallback."""
from __future__ import annotations

import time
from typing import Any

from distdoctor.knowledge.i18n import t

from ..base import OK, WARN, ProbeContext, ProbeResult, unavailable
from ..runner import CommandResult
from .nvml_source import nvml_topology

# The parsers and the assessment (networkx) are imported only once there is a topology to read:
# a node without a driver answers "unavailable" in milliseconds, not after ~0.3 s of imports.

NAME = "topology"
TOPO_M = ("nvidia-smi", "topo", "-m")
TOPO_P2P = ("nvidia-smi", "topo", "-p2p", "r")


def why_failed(result: CommandResult) -> str:
    if result.error:
        return result.error
    first = (result.stdout.strip() or result.stderr.strip()).splitlines()[:1]
    return t("{command} exited {code}", command=" ".join(result.argv), code=result.returncode) \
        + (f": {first[0][:120]}" if first else "")


def probe_topology(ctx: ProbeContext, nvml: Any = None) -> ProbeResult:
    """Facts = the `distdoctor topo --json` dict. `nvml` replaces the pynvml module (tests)."""
    start = time.monotonic()
    topo, nvml_reason = nvml_topology(nvml, deadline=max(ctx.timeout, 1.0))
    smi = ctx.runner(TOPO_M, timeout=ctx.timeout)
    raw = [f"$ {' '.join(TOPO_M)}\n{smi.stdout}"]
    if topo is None and not smi.ok:
        return unavailable(NAME, nvml_reason + t("; ") + why_failed(smi))
    from .assess import analyse
    from .load import TopologyInputError, parse_text

    if topo is not None:
        if smi.ok:  # NVML knows nothing of NICs: the matrix adds them and their distances
            try:
                topo.merge(parse_text(smi.stdout, "nvidia-smi topo -m"))
            except TopologyInputError as exc:
                topo.note(f"nvidia-smi topo -m could not be read: {exc}")
    else:
        text = smi.stdout
        p2p = ctx.runner(TOPO_P2P, timeout=ctx.timeout)
        if p2p.ok:
            text += "\n$ nvidia-smi topo -p2p r\n" + p2p.stdout
            raw.append(f"$ {' '.join(TOPO_P2P)}\n{p2p.stdout}")
        try:
            topo = parse_text(text, "nvidia-smi topo")
        except TopologyInputError as exc:
            return unavailable(NAME, f"{nvml_reason}; {exc}")
        topo.note(f"NVML unavailable ({nvml_reason}): read from nvidia-smi.")
    facts = analyse(topo)
    status = WARN if facts["p2p"] in ("none", "partial") else OK
    return ProbeResult(NAME, status, facts, raw="\n".join(raw)[:65536],
                       duration_s=time.monotonic() - start)
