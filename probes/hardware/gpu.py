"""GPU health probe: ECC, retired pages, row remapping, reset status, throttle reasons, PCIe
link generation and width (current against max) and NVLink, from `nvidia-smi -q` (live, or
sos's nvidia-smi_-q, nvidia-smi_-q_-d_ECC, ..._PAGE_RETIREMENT, nvidia-smi_nvlink_-s/-e).

Facts only: each GPU's record, and per condition the list of GPUs it holds for (an empty list
when none). Whether that is a fault, and how bad, is checks.toml's call."""
from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any

from ..base import OK, ProbeContext, ProbeResult, unavailable
from .nvsmi import parse_nvlink_errors, parse_nvlink_status, parse_query
from .source import Text, bus_id, is_recorded, read_file, reason_of, run

NAME = "gpu_health"
SOS = "sos_commands/nvidia/"
QUERY_FILES = (SOS + "nvidia-smi_-q", SOS + "nvidia-smi_-q_-d_ECC", SOS + "nvidia-smi_-q_-d_PAGE_RETIREMENT")
NVLINK_STATUS = (SOS + "nvidia-smi_nvlink_-s",)
NVLINK_ERRORS = (SOS + "nvidia-smi_nvlink_-e",)


def _merge(gpus: dict[str, dict[str, Any]], records: list[dict[str, Any]]) -> None:
    """Later files (a -d section) fill what earlier ones (the full -q) left unknown."""
    for record in records:
        have = gpus.setdefault(record["bus"], {})
        for key, val in record.items():
            if have.get(key) is None or have.get(key) == []:
                have[key] = val


# nvidia-smi's words for a GPU the driver lost (Xid 79, a GPU that fell off the bus): it then
# exits non-zero, and these lines are the evidence, not a reason to give up
_BUS = r"[0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?"
_LOST = re.compile(r"Unable to determine the device handle for (?:GPU|gpu)\s*(?P<bus>" + _BUS + r")?:?\s*(?P<why>.*)"
                   r"|GPU (?P<bus2>" + _BUS + r"): GPU is lost|(?P<lost>GPU is lost)")


def _query(ctx: ProbeContext) -> tuple[Text | None, str]:
    """`nvidia-smi -q`, kept when it fails because a GPU is lost (its output names the GPU)."""
    result = ctx.runner(["nvidia-smi", "-q"], timeout=ctx.timeout)
    text = (result.stdout or "") + (result.stderr or "")
    if result.ok or (not result.error and _LOST.search(text)):
        return Text(text, "nvidia-smi -q"), ""
    return None, reason_of(result)


def lost_gpus(text: str) -> list[str]:
    """The GPUs nvidia-smi could not reach, by bus id where it says ("?" where it does not)."""
    out = []
    for match in _LOST.finditer(text):
        bus = match["bus"] or match["bus2"]
        why = (match["why"] or "GPU is lost").strip()
        item = f"{bus_id(bus) if bus else '?'}: {why}"
        if item not in out:
            out.append(item)
    return out


def _texts(ctx: ProbeContext) -> tuple[list[Text], Text | None, Text | None, list[str]]:
    queries = [found for f in QUERY_FILES if (found := read_file(ctx, f)) is not None]
    status = next((found for f in NVLINK_STATUS if (found := read_file(ctx, f))), None)
    errors = next((found for f in NVLINK_ERRORS if (found := read_file(ctx, f))), None)
    if queries:
        return queries, status, errors, []
    found, why = _query(ctx)
    if found is None:
        return [], None, None, [why]
    status, _ = run(ctx, ("nvidia-smi", "nvlink", "-s"))
    errors, _ = run(ctx, ("nvidia-smi", "nvlink", "-e"))
    return [found], status, errors, []


def _where(gpu: dict[str, Any]) -> str:
    bus = "GPU (bus id not recorded)" if gpu["bus"] == "unknown" else gpu["bus"]
    return f"{bus} ({gpu['product']})" if gpu.get("product") else bus


def facts_of(queries: list[Text], status: Text | None, errors: Text | None) -> dict[str, Any]:
    header: dict[str, Any] = {}
    gpus: dict[str, dict[str, Any]] = {}
    for text in queries:
        head, records = parse_query(text.text)
        header = header or {k: v for k, v in head.items() if v}
        _merge(gpus, records)
    records = list(gpus.values())
    lost = [item for text in queries for item in lost_gpus(text.text)]

    def over(key: str, limit: int = 0) -> list[str]:
        return [f"{_where(g)}: {g[key]}" for g in records if (g.get(key) or 0) > limit]

    def flag(key: str) -> list[str]:
        return [_where(g) for g in records if g.get(key) is True]

    width = [f"{_where(g)}: x{g['pcie_width_current']} of x{g['pcie_width_max']}" for g in records
             if g.get("pcie_width_current") and g.get("pcie_width_max")
             and g["pcie_width_current"] < g["pcie_width_max"]]
    # an idle GPU drops its link to Gen1 to save power: only a busy one's generation counts
    gen = [f"{_where(g)}: Gen{g['pcie_gen_current']} of Gen{g['pcie_gen_max']} while busy"
           for g in records if g.get("pcie_gen_current") and g.get("pcie_gen_max")
           and g["pcie_gen_current"] < g["pcie_gen_max"] and not g.get("idle")
           and g.get("pstate") in ("P0", "P1", "P2") and (g.get("utilization_pct") or 0) > 0]
    hw_slow = [f"{_where(g)}: {', '.join(r for r in g['throttle_active'] if r.startswith('HW'))}"
               for g in records if any(r.startswith("HW") for r in g.get("throttle_active") or ())]
    # an NVSwitch system's GPU takes no work until the fabric manager has trained its fabric
    fabric = [f"{_where(g)}: {g.get('fabric_state')} / {g.get('fabric_status')}" for g in records
              if (g.get("fabric_state") or "N/A") not in ("N/A", "Completed")
              or (g.get("fabric_status") or "N/A") not in ("N/A", "Success")]
    nvl_status = parse_nvlink_status(status.text) if status else {}
    nvl_errors = parse_nvlink_errors(errors.text) if errors else {}
    # a GPU with some links up and some down has a degraded NVLink; all down is a GPU without
    # NVLink (or with NVLink off), which the topology probe describes
    inactive = [f"{gpu} ({s['name']}): links {', '.join(map(str, s['inactive']))} inactive, {s['active']} active"
                for gpu, s in nvl_status.items() if s["inactive"] and s["active"]]
    nvl_err = [f"{gpu}: " + ", ".join(f"{k}={v}" for k, v in sorted(c.items()) if v)
               for gpu, c in nvl_errors.items() if any(c.values())]
    return {
        "sources": [t.origin for t in queries] + [t.origin for t in (status, errors) if t],
        "driver_version": header.get("driver"),
        "cuda_driver_version": header.get("cuda"),
        "gpu_count": len(records),
        "gpus": records,
        "ecc_volatile_uncorrectable": over("ecc_volatile_uncorrectable"),
        "ecc_aggregate_uncorrectable": over("ecc_aggregate_uncorrectable"),
        "gpus_lost": lost,
        "sram_threshold_exceeded": flag("sram_threshold_exceeded"),
        "fabric_not_ready": fabric,
        "retired_pages_pending": flag("retired_pending"),
        "remap_pending": flag("remap_pending"),
        "remap_failed": flag("remap_failure"),
        "reset_required": sorted(set(flag("reset_required")) | set(flag("drain_and_reset"))),
        "pcie_width_degraded": width,
        "pcie_gen_degraded_busy": gen,
        "hw_slowdown": hw_slow,
        "nvlink_inactive": inactive,
        "nvlink_errors": nvl_err,
    }


def probe_gpu_health(ctx: ProbeContext) -> ProbeResult:
    """Every GPU's ECC, remapping, reset, throttle, PCIe link and NVLink health."""
    queries, status, errors, reasons = _texts(ctx)
    if not queries:
        if is_recorded(ctx):
            return unavailable(NAME, "not in this recorded node (no " + ", ".join(QUERY_FILES) + ")")
        return unavailable(NAME, "no nvidia-smi -q output: " + "; ".join(reasons))
    facts = facts_of(queries, status, errors)
    if not facts["gpus"] and not facts["gpus_lost"]:
        return unavailable(NAME, f"no GPU in {', '.join(facts['sources'])}")
    return ProbeResult(NAME, OK, MappingProxyType(facts))
