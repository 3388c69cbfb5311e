"""The compared fields of a snapshot, pulled out of the probes' facts, and the topology summary."""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import PurePath
from typing import Any

from ...knowledge.evaluate import lookup
from ..base import ProbeResult
from .schema import SUMMARY_FIELDS

# Where each compared field may sit in the probes' facts, first match wins. Dotted paths walk
# nested mappings, so a probe that groups its facts ("torch": {"version": ...}) is read as well
# as a flat one ("torch_version"); one table keeps the probes and the fleet view decoupled.
CANDIDATES: dict[str, tuple[tuple[str, str], ...]] = {
    "python": (("versions", "python.version"), ("versions", "python_version")),
    "torch_git": (("versions", "torch.git"), ("versions", "torch_git")),
    "glibc": (("versions", "glibc"),),
    "kernel": (("versions", "kernel"),),
    # every NCCL build on disk (pip packages, system libraries), as the versions probe lists them
    "nccl_files": (("versions", "nccl_builds_text"),),
    "torch": (("versions", "torch.version"), ("versions", "torch_version")),
    "torch_cuda": (("versions", "torch.cuda"), ("versions", "torch.hip"),
                   ("versions", "torch_cuda")),
    "nccl": (("versions", "nccl.loaded"), ("versions", "torch.nccl"), ("versions", "nccl_version")),
    "driver": (("versions", "driver.version"), ("topology", "driver_version"),
               ("versions", "driver_version"), ("gpu_health", "driver_version")),
    "cuda_driver": (("versions", "driver.cuda"), ("topology", "cuda_driver_version"),
                    ("versions", "cuda_driver_version"), ("gpu_health", "cuda_driver_version")),
    "gpu_count": (("topology", "gpu_count"), ("versions", "driver.gpu_count"), ("gpu_health", "gpu_count")),
    "shm_bytes": (("shm", "size_bytes"),),
}
GPU_LISTS = (("topology", "gpus"), ("versions", "gpus"), ("gpu_health", "gpus"))
GPU_NAME_KEYS = ("name", "model", "product", "product_name")


def version_text(value: Any) -> str | None:
    """A version as text: (2, 21, 5) -> "2.21.5", NCCL's code 22105 -> "2.21.5"."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
        return ".".join(str(v) for v in value)
    if isinstance(value, int):
        # NCCL_VERSION_CODE: major*10000+minor*100+patch since 2.9, major*1000+minor*100+patch before
        if value >= 20900:
            return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
        if value >= 1000:
            return f"{value // 1000}.{value % 1000 // 100}.{value % 100}"
        return str(value)
    if isinstance(value, Mapping):
        return version_text(value.get("version"))
    text = str(value).strip()
    return text or None


def _facts(results: Mapping[str, ProbeResult | Mapping[str, Any]], probe: str) -> Mapping[str, Any]:
    result = results.get(probe)
    if result is None:
        return {}
    facts = result.facts if isinstance(result, ProbeResult) else result.get("facts", {})
    return facts if isinstance(facts, Mapping) else {}


def _first(results: Mapping[str, Any], candidates: Iterable[tuple[str, str]]) -> Any:
    for probe, path in candidates:
        value = lookup(_facts(results, probe), path, None)
        if value is not None:
            return value
    return None


def gpu_models(results: Mapping[str, Any]) -> list[str | None] | None:
    """One model name per GPU (None where the source does not name it, as `topo -m` does not),
    from the first probe that lists GPUs; None when none does."""
    for probe, path in GPU_LISTS:
        gpus = lookup(_facts(results, probe), path, None)
        if isinstance(gpus, Mapping):  # keyed by bus id or index
            gpus = list(gpus.values())
        if not isinstance(gpus, (list, tuple)):
            continue
        names: list[str | None] = []
        for gpu in gpus:
            if isinstance(gpu, Mapping):
                if gpu.get("seen") is False:  # named by a log line, not present on this node
                    continue
                name = next((gpu[k] for k in GPU_NAME_KEYS if gpu.get(k)), None)
            else:
                name = gpu
            names.append(None if name is None else str(name))
        return names
    return None


def model_text(models: list[str | None] | None) -> str | None:
    """"NVIDIA H100" for a uniform node; "A100 x4, H100 x4" when one node mixes models."""
    counts = Counter(m for m in models or () if m)
    if not counts:
        return None
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{name} x{n}" for name, n in sorted(counts.items()))


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def switches(results: Mapping[str, Any]) -> dict[str, str]:
    """The distributed switches in effect (environment and nccl.conf files): NAME -> value."""
    variables = _facts(results, "switches").get("variables")
    pairs: dict[str, str] = {}
    if isinstance(variables, Mapping):
        for name, item in variables.items():
            # the probe gives {"value", "source"}; a plain NAME -> value mapping is read as well
            value = item.get("value") if isinstance(item, Mapping) else item
            if value is not None:
                pairs[str(name)] = str(value)
    return dict(sorted(pairs.items()))


def summarise(results: Mapping[str, Any]) -> dict[str, Any]:
    """The compared fields (schema.SUMMARY_FIELDS), normalised to strings and integers (None when unknown)."""
    summary: dict[str, Any] = {f: version_text(_first(results, CANDIDATES[f]))
                               for f in ("python", "torch", "torch_git", "torch_cuda", "nccl",
                                         "nccl_files", "driver", "cuda_driver", "glibc", "kernel")}
    if summary["glibc"] and summary["glibc"].startswith("glibc "):  # the probe says "glibc 2.35"
        summary["glibc"] = summary["glibc"][len("glibc "):]
    models = gpu_models(results)
    count = _int(_first(results, CANDIDATES["gpu_count"]))
    summary["gpu_model"] = model_text(models)
    summary["gpu_count"] = count if count is not None else (len(models) if models is not None else None)
    summary["shm_bytes"] = _int(_first(results, CANDIDATES["shm_bytes"]))
    summary["hardware"] = None  # judged by the knowledge base's checks: snapshot() fills it in
    summary = {field: summary[field] for field in SUMMARY_FIELDS}
    summary["switches"] = switches(results)
    return summary


def topology_summary(result: ProbeResult | None) -> dict[str, Any]:
    """The topology probe's verdict in brief: status, source, GPU count and models, p2p, nvlink."""
    if result is None:
        return {"status": "unavailable", "reason": "no topology probe", "source": None,
                "gpu_count": None, "gpu_models": [], "p2p": None, "nvlink": None}
    facts = result.facts
    models = gpu_models({"topology": result})
    count = _int(facts.get("gpu_count"))
    return {"status": result.status, "reason": result.reason,
            "source": None if facts.get("source") is None else str(facts.get("source")),
            "gpu_count": count if count is not None else (None if models is None else len(models)),
            "gpu_models": [m or "unknown" for m in models or ()], "p2p": jsonable(facts.get("p2p")),
            "nvlink": jsonable(facts.get("nvlink"))}


def jsonable(value: Any) -> Any:
    """Plain JSON types all the way down: mappings, tuples, sets and paths are converted."""
    if isinstance(value, float) and not math.isfinite(value):
        return None  # NaN and infinities are not JSON
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(v) for v in value), key=str)
    if isinstance(value, PurePath):
        return str(value)
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return jsonable(to_dict())
    return str(value)
