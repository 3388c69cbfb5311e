"""Switches probe: NCCL/torch/Gloo variables from the environment and NCCL's config files."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .base import OK, ProbeContext, ProbeResult, unavailable
from .procenv import EnvUnreadable, env_source, target_env

NAME = "switches"
PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "TORCH_FR_", "GLOO_")
EXTRA = ("TORCH_CPP_LOG_LEVEL", "TORCH_SHOW_CPP_STACKTRACES")
# Old name -> new name (GUIDE section 3; PyTorch's TORCH_NCCL_* renames and the 2.9 TORCH_FR_*).
DEPRECATED = {
    "NCCL_BLOCKING_WAIT": "TORCH_NCCL_BLOCKING_WAIT",
    "NCCL_ASYNC_ERROR_HANDLING": "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "NCCL_DESYNC_DEBUG": "TORCH_NCCL_DESYNC_DEBUG",
    "NCCL_ENABLE_TIMING": "TORCH_NCCL_ENABLE_TIMING",
    "NCCL_AVOID_RECORD_STREAMS": "TORCH_NCCL_AVOID_RECORD_STREAMS",
    "NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK": "TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK",
    "TORCH_NCCL_TRACE_BUFFER_SIZE": "TORCH_FR_BUFFER_SIZE",
    "TORCH_NCCL_TRACE_CPP_STACK": "TORCH_FR_CPP_STACK",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "TORCH_FR_DUMP_TEMP_FILE",
}
# Old names PyTorch no longer reads at all. The others it still reads through getCvarInt/Bool/String
# (c10d/Utils.hpp), which take the new name first in the list and print "Environment variable OLD is
# deprecated; use NEW instead" once; when both are set, the new name's value wins. Checked against
# torch 2.13's ProcessGroupNCCL.hpp and FlightRecorder.hpp (tests/integration/test_knowledge_facts.py).
NOT_READ = frozenset({"NCCL_AVOID_RECORD_STREAMS"})
# Verbose logging: wanted while debugging, noise and slowdown when left in a production job.
VERBOSE = {"NCCL_DEBUG": ("INFO", "TRACE"), "TORCH_DISTRIBUTED_DEBUG": ("INFO", "DETAIL"),
           "TORCH_CPP_LOG_LEVEL": ("INFO",), "NCCL_DEBUG_SUBSYS": None,
           "TORCH_NCCL_DESYNC_DEBUG": ("1",), "NCCL_DESYNC_DEBUG": ("1",)}
# Bisection switches: NCCL's docs say they must not stay once the root cause is found.
BISECTION = {"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1", "NCCL_SHM_DISABLE": "1",
             "NCCL_NET_GDR_LEVEL": None, "NCCL_P2P_LEVEL": None, "NCCL_ALGO": None,
             "NCCL_PROTO": None, "NCCL_TOPO_DUMP_FILE": None, "NCCL_CUMEM_ENABLE": "0",
             "NCCL_NVLS_ENABLE": "0"}
FR_ON = ("export TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_DUMP_TEMP_FILE=/shared/fr/trace_rank_"
         "   # torch before 2.9: TORCH_NCCL_TRACE_BUFFER_SIZE and TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
TIMEOUT_NAMES = ("TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT", "TORCH_NCCL_DUMP_ON_TIMEOUT",
                 "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC")


def parse_conf(text: str) -> dict[str, str]:
    """NAME=value lines of an nccl.conf; '#' starts a comment, as in NCCL's setEnvFile."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        name, sep, value = line.partition("=")
        name = name.strip()
        if sep and name:
            out[name] = value.strip()
    return out


def conf_files(ctx: ProbeContext, env: Mapping[str, str]) -> list[tuple[str, Path]]:
    """NCCL's order: NCCL_CONF_FILE (else ~/.nccl.conf), then /etc/nccl.conf; earlier wins."""
    user = env.get("NCCL_CONF_FILE")
    first = (user, ctx.path(user)) if user and user.startswith("/") else \
        (user, Path(user)) if user else ("~/.nccl.conf", ctx.home / ".nccl.conf")
    return [first, ("/etc/nccl.conf", ctx.path("/etc/nccl.conf"))]


def _wanted(name: str) -> bool:
    return name.startswith(PREFIXES) or name in EXTRA


def collect(ctx: ProbeContext, env: Mapping[str, str]) -> tuple[dict[str, dict[str, str]],
                                                                  list[dict[str, Any]],
                                                                  list[dict[str, str]]]:
    """(effective variables with their source, config files read, entries shadowed by others)."""
    effective = {k: {"value": v, "source": "env"} for k, v in env.items() if _wanted(k)}
    files: list[dict[str, Any]] = []
    shadowed: list[dict[str, str]] = []
    for shown, path in conf_files(ctx, env):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            files.append({"path": shown, "read": False, "reason": "absent"})
            continue
        except OSError as exc:
            files.append({"path": shown, "read": False, "reason": exc.strerror or str(exc)})
            continue
        entries = parse_conf(text)
        files.append({"path": shown, "read": True, "count": len(entries)})
        for name, value in entries.items():
            if name in effective:  # NCCL's setenv(..., 0): the environment and earlier files win
                shadowed.append({"name": name, "value": value, "source": shown,
                                 "by": effective[name]["source"]})
            else:
                effective[name] = {"value": value, "source": shown}
    return dict(sorted(effective.items())), files, shadowed


def judge(effective: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """Deprecated names, debugging switches left on, and hardened defaults missing."""
    values = {k: v["value"] for k, v in effective.items()}

    def shown(name: str) -> str:
        source = effective[name]["source"]
        return f"{name}={values[name]}" + ("" if source == "env" else f" (in {source})")

    deprecated = [{"name": old, "replacement": new, "value": values[old], "still_read": old not in NOT_READ,
                   "overridden_by": values[new] if new in values and values[new] != values[old] else None}
                  for old, new in DEPRECATED.items() if old in values]
    verbose = [shown(k) for k, vals in VERBOSE.items()
               if k in values and (vals is None or values[k].upper() in vals)]
    bisection = [shown(k) for k, val in BISECTION.items()
                 if k in values and (val is None or values[k] == val)]
    # getCvar* reads the old name, then the new one over it: the new name wins when both are set
    aeh_name = next((n for n in ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING")
                     if n in values), "TORCH_NCCL_ASYNC_ERROR_HANDLING")
    aeh = values.get(aeh_name)
    blocking = values.get("TORCH_NCCL_BLOCKING_WAIT", values.get("NCCL_BLOCKING_WAIT"))
    fr_name = next((n for n in ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE") if n in values),
                   "TORCH_FR_BUFFER_SIZE")
    fr = values.get(fr_name)
    dump = values.get("TORCH_NCCL_DUMP_ON_TIMEOUT", "").strip().lower() in ("1", "y", "yes", "t", "true")
    return {
        "deprecated": deprecated,
        "deprecated_text": ", ".join(f"{d['name']} -> {d['replacement']}" for d in deprecated),
        "deprecated_fix": "; ".join(f"unset {d['name']}; export {d['replacement']}={d['value']}"
                                    for d in deprecated),
        "deprecated_detail": " ".join(_deprecated_detail(d) for d in deprecated),
        "verbose_on": verbose,
        "verbose_text": ", ".join(verbose),
        "debug_switches_on": bisection,
        "debug_text": ", ".join(bisection),
        "debug_fix": _removal(effective, [k for k, val in BISECTION.items()
                                          if k in values and (val is None or values[k] == val)]),
        # 0 turns off tearing down on a failed collective: a dead rank then hangs the rest forever.
        "error_handling_off": aeh == "0" and blocking != "1",
        "flight_recorder_off": fr is not None and fr.strip() == "0",
        "flight_recorder_setting": f"{fr_name}={fr}",
        "flight_recorder_fix": ("unset TORCH_NCCL_TRACE_BUFFER_SIZE; " if "TORCH_NCCL_TRACE_BUFFER_SIZE" in values
                                else "") + FR_ON,
        # Flight Recorder dumps on a timeout need mode 3 (GUIDE section 3)
        "fr_dump_blocked": dump and aeh is not None and aeh.strip() != "3",
        "async_error_handling": aeh,
        "async_error_handling_name": aeh_name,
        "timeouts_unset": not any(name in values for name in TIMEOUT_NAMES),
    }


def _deprecated_detail(d: Mapping[str, Any]) -> str:
    """What PyTorch does with one old name: read with a warning, overridden by the new one, or ignored."""
    old, new = d["name"], d["replacement"]
    if not d["still_read"]:
        return f"{old}={d['value']} is no longer read (torch 2.13 reads only {new}): it has no effect."
    if d["overridden_by"] is not None:
        return (f"{old}={d['value']} is read with a deprecation warning, but {new}={d['overridden_by']} "
                f"is also set and wins.")
    return (f"{old}={d['value']} still works: PyTorch reads it and warns once "
            f"'Environment variable {old} is deprecated; use {new} instead'.")


def _removal(effective: Mapping[str, Mapping[str, str]], names: list[str]) -> str:
    """'unset A B' for environment switches, 'delete the A line from FILE' for config-file ones."""
    in_env = [n for n in names if effective[n]["source"] == "env"]
    parts = ["unset " + " ".join(in_env)] if in_env else []
    parts += [f"delete the {n}= line from {effective[n]['source']}" for n in names
              if effective[n]["source"] != "env"]
    return "; ".join(parts)


def probe_switches(ctx: ProbeContext) -> ProbeResult:
    """Every NCCL_*/TORCH_NCCL_*/TORCH_DISTRIBUTED_*/GLOO_* switch that will apply, and where from."""
    try:
        env = target_env(ctx)
    except EnvUnreadable as exc:
        return unavailable(NAME, str(exc))
    effective, files, shadowed = collect(ctx, env)
    from_files = [f"{k}={v['value']} ({v['source']})" for k, v in effective.items()
                  if v["source"] != "env"]
    facts: dict[str, Any] = {
        "source": env_source(ctx),
        "variables": effective,
        "config_files": files,
        "shadowed": shadowed,
        "from_files": from_files,
        "from_files_text": ", ".join(from_files),
        "count": len(effective),
    }
    facts.update(judge(effective))
    return ProbeResult(NAME, OK, MappingProxyType(facts))
