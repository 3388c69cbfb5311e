"""The NVIDIA driver version (NVML, else /proc) and whether it is new enough for a CUDA build."""
from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from typing import Any

from distdoctor.knowledge import tomlload

from .base import ProbeContext

log = logging.getLogger(__name__)


_PROC_RE = re.compile(r"NVRM version:.*?\s(\d+\.\d+(?:\.\d+)?)\s")


def vtuple(version: str) -> tuple[int, ...]:
    """'535.104.05' -> (535, 104, 5); non-numeric parts end the tuple."""
    out = []
    for part in re.split(r"[.+-]", version):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


def cuda_tuple(cuda: str) -> tuple[int, int] | None:
    parts = vtuple(cuda)
    return (parts[0], parts[1] if len(parts) > 1 else 0) if parts else None


def parse_drivers(text: str, where: str = "cuda_drivers.toml") -> tuple[dict[tuple[int, int], str], dict[int, str]]:
    """(toolkit (major, minor) -> minimum driver, major -> minor-compatibility driver) from a
    cuda_drivers.toml text; a ValueError naming the key when one is not a version."""
    doc = tomlload.loads(text)
    toolkit: dict[tuple[int, int], str] = {}
    major: dict[int, str] = {}
    for table, key_parts in (("toolkit", 2), ("major", 1)):
        for key, driver in doc.get(table, {}).items():
            parts = vtuple(key)
            if len(parts) != key_parts or not isinstance(driver, str) or len(vtuple(driver)) < 2:
                raise ValueError(f"{where}: [{table}] {key!r} = {driver!r}: expected a CUDA "
                                 f"version {'major.minor' if key_parts == 2 else 'major'} and a driver version")
            if key_parts == 2:
                toolkit[(parts[0], parts[1])] = driver
            else:
                major[parts[0]] = driver
    if not toolkit or not major:
        raise ValueError(f"{where}: needs a [toolkit] and a [major] table")
    return toolkit, major


TOOLKIT_MIN_DRIVER, MAJOR_MIN_DRIVER = parse_drivers(
    resources.files(__package__).joinpath("cuda_drivers.toml").read_text(encoding="utf-8"))

NVML_LIBRARY = "libnvidia-ml.so.1"  # what pynvml dlopens on Linux
NVML_NOT_FOUND = "NVML Shared Library Not Found"  # pynvml's own words when that dlopen fails


def nvml_library_missing() -> bool:
    """True when the driver's NVML library cannot be loaded, which is exactly when pynvml's
    nvmlInit fails with "NVML Shared Library Not Found". Asking the dynamic loader first costs
    well under a millisecond; importing pynvml to learn the same costs ~30 ms."""
    if not sys.platform.startswith("linux"):
        return False  # pynvml looks elsewhere on other systems: let it say so itself
    import ctypes

    try:
        ctypes.CDLL(NVML_LIBRARY)
    except OSError:
        return True
    return False


class NvmlUnavailable(Exception):
    """NVML could not be opened. `kind`: "missing" (no driver library), "import" (no pynvml),
    "init" (nvmlInit failed; `exc` is the NVMLError) or "os"; callers word the reason."""

    def __init__(self, kind: str, detail: str, exc: BaseException | None = None) -> None:
        super().__init__(detail)
        self.kind, self.detail, self.exc = kind, detail, exc


@contextmanager
def opened_nvml(nvml: Any = None) -> Iterator[Any]:
    """An initialised pynvml (or the injected fake), shut down on exit; NvmlUnavailable when it
    cannot be opened. The driver library is looked for before pynvml is imported (~30 ms)."""
    if nvml is None:
        if nvml_library_missing():
            raise NvmlUnavailable("missing", NVML_NOT_FOUND)
        try:
            import pynvml as nvml  # nvidia-ml-py; only the driver's libnvidia-ml is needed
        except ImportError as exc:
            raise NvmlUnavailable("import", str(exc)) from None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        raise NvmlUnavailable("init", str(exc), exc) from None
    except OSError as exc:
        raise NvmlUnavailable("os", str(exc)) from None
    try:
        yield nvml
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError as exc:  # the facts are taken; a failed shutdown only gets logged
            log.debug("nvmlShutdown: %s", exc)


def driver_from_nvml(nvml: Any) -> tuple[dict[str, Any] | None, str]:
    """(facts, "") from NVML, or (None, why not). Every call is guarded: NVML raises on no driver."""
    try:
        with opened_nvml(nvml) as nv:
            try:
                facts: dict[str, Any] = {"source": "nvml"}
                version = nv.nvmlSystemGetDriverVersion()
                facts["version"] = version.decode() if isinstance(version, bytes) else str(version)
                try:
                    code = int(nv.nvmlSystemGetCudaDriverVersion())
                    facts["cuda"] = f"{code // 1000}.{(code % 1000) // 10}"
                except nv.NVMLError as exc:
                    facts["cuda_error"] = str(exc)
                try:
                    facts["gpu_count"] = int(nv.nvmlDeviceGetCount())
                except nv.NVMLError as exc:
                    facts["gpu_count_error"] = str(exc)
                return facts, ""
            except nv.NVMLError as exc:
                return None, f"NVML: {exc}"
    except NvmlUnavailable as why:
        prefix = "pynvml not importable: " if why.kind == "import" else "NVML: "
        return None, prefix + why.detail


def driver_from_proc(ctx: ProbeContext) -> dict[str, Any] | None:
    text = ctx.read_text("/proc/driver/nvidia/version")
    if text is None:
        return None
    match = _PROC_RE.search(text)
    if not match:
        return None
    version = match.group(1)
    return {"source": "/proc/driver/nvidia/version", "version": version,
            "cuda": max_cuda_for(version)}


def max_cuda_for(driver: str) -> str | None:
    """The newest CUDA toolkit whose full feature set this driver supports."""
    have = vtuple(driver)
    best = None
    for cuda, need in sorted(TOOLKIT_MIN_DRIVER.items()):
        if have >= vtuple(need):
            best = cuda
    return f"{best[0]}.{best[1]}" if best else None


def min_driver_for(cuda: tuple[int, int]) -> str | None:
    """The toolkit driver of this CUDA version, or of the nearest older listed minor."""
    listed = [c for c in TOOLKIT_MIN_DRIVER if c[0] == cuda[0] and c <= cuda]
    return TOOLKIT_MIN_DRIVER[max(listed)] if listed else None


def judge(driver: dict[str, Any] | None, cuda_build: str | None) -> dict[str, Any]:
    """The driver's version and the drivers torch's CUDA build needs, as facts checks.toml
    compares; empty when either is unknown."""
    if not driver or not driver.get("version") or not cuda_build:
        return {}
    build = cuda_tuple(cuda_build)
    if build is None:
        return {}
    have = vtuple(driver["version"])
    full = min_driver_for(build)
    compat = MAJOR_MIN_DRIVER.get(build[0])
    floor = compat or full
    if floor is None:
        return {}
    # The versions as arrays of numbers, which checks.toml compares part by part: below the floor
    # (the oldest driver the CUDA major runs on) it fails; between the floor and the driver the
    # toolkit ships with (`full`) only minor version compatibility applies: it runs, but kernels
    # that need newer PTX fail ("unsupported toolchain").
    facts: dict[str, Any] = {"driver_version_parts": list(have),
                             "driver_floor_parts": list(vtuple(floor)),
                             "driver_full_parts": list(vtuple(full or floor))}
    # the same judgements as booleans, for the readers of the facts; the checks compare the parts
    facts["driver_too_old"] = have < vtuple(floor)
    facts["driver_min_required"] = floor if facts["driver_too_old"] else (full or floor)
    facts["driver_minor_compat_only"] = bool(
        not facts["driver_too_old"] and full and have < vtuple(full))
    return facts
