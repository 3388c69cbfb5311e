"""Live topology through NVML (pynvml from nvidia-ml-py): every call guarded, the whole sweep run in a
daemon thread under a deadline because a wedged GPU can make NVML calls block."""
from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from distdoctor.knowledge.i18n import t

from ..cuda_driver import NvmlUnavailable, opened_nvml
from .model import NVML_LEVEL_CODE, Gpu, Topology, cpu_ranges, norm_bus_id, short_bus

# nvmlGpuP2PStatus_t -> the code `nvidia-smi topo -p2p` prints.
P2P_STATUS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}
# nvmlGpuP2PCapsIndex_t, written out: pynvml's NVML_P2P_CAPS_INDEX_READ is the tuple (0,) (a stray comma).
P2P_INDEX = (("read", 0), ("write", 1), ("nvlink", 2))
NO_DRIVER_CODES = {9, 12}  # NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_LIBRARY_NOT_FOUND
CPU_SET_WORDS = 16         # 64 CPUs per word: 1024 CPUs
NVLINK_DEVICE_GPU = 0     # nvmlDeviceGetNvLinkRemoteDeviceType: GPU, else NVSwitch/other


class Sweep:
    """One pass over the devices; `call` turns every NVML error into None plus a recorded reason."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.errors: list[str] = []

    def call(self, fn_name: str, *args: Any) -> Any:
        fn: Callable[..., Any] | None = getattr(self.nvml, fn_name, None)
        if fn is None:
            self.errors.append(f"{fn_name}: not in this pynvml")
            return None
        try:
            return fn(*args)
        except self.nvml.NVMLError as exc:
            self.errors.append(f"{fn_name}: {exc}")
            return None

    def run(self) -> Topology:
        nv = self.nvml
        topo = Topology(sources=["nvml"], nvlink_visible=True)
        count = nv.nvmlDeviceGetCount()
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        for i, handle in enumerate(handles):
            name = self.call("nvmlDeviceGetName", handle)
            pci = self.call("nvmlDeviceGetPciInfo", handle)
            numa = self.call("nvmlDeviceGetNumaNodeId", handle)
            words = self.call("nvmlDeviceGetCpuAffinity", handle, CPU_SET_WORDS)
            topo.add_gpu(Gpu(f"GPU{i}", index=i, name=text(name), bus_id=bus_of(pci),
                             numa=numa if isinstance(numa, int) and numa >= 0 else None,
                             cpus=cpus_of(words)))
        for i, handle in enumerate(handles):
            self.nvlinks(topo, i, handle)
        for i in range(count):
            for j in range(i + 1, count):
                for kind, index in P2P_INDEX:
                    status = self.call("nvmlDeviceGetP2PStatus", handles[i], handles[j], index)
                    if isinstance(status, int):
                        topo.set_p2p(f"GPU{i}", f"GPU{j}", kind, P2P_STATUS.get(status, "U"))
                level = self.call("nvmlDeviceGetTopologyCommonAncestor", handles[i], handles[j])
                if isinstance(level, int) and level in NVML_LEVEL_CODE:
                    topo.set_link(f"GPU{i}", f"GPU{j}", NVML_LEVEL_CODE[level])
        if any(not e.startswith("nvmlDeviceGetNvLink") for e in self.errors):
            topo.note(t("NVML could not answer every question: {errors}", errors="; ".join(self.errors[:3])))
        return topo

    def nvlinks(self, topo: Topology, i: int, handle: Any) -> None:
        """Active links and what is on their far end; a GPU without NVLink answers NotSupported."""
        by_bus = {gpu.bus_id: key for key, gpu in topo.gpus.items() if gpu.bus_id}
        counts: dict[str, int] = {}
        for link in range(int(getattr(self.nvml, "NVML_NVLINK_MAX_LINKS", 18))):
            state = self.call("nvmlDeviceGetNvLinkState", handle, link)
            if state is None:
                break  # NotSupported (no NVLink) or InvalidArgument (past this GPU's last link)
            if state != getattr(self.nvml, "NVML_FEATURE_ENABLED", 1):
                continue
            remote = bus_of(self.call("nvmlDeviceGetNvLinkRemotePciInfo", handle, link))
            kind = self.call("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link) \
                if hasattr(self.nvml, "nvmlDeviceGetNvLinkRemoteDeviceType") else None
            if remote in by_bus and kind in (None, NVLINK_DEVICE_GPU):
                peer = by_bus[remote]
            else:
                peer = f"NVS@{short_bus(remote) if remote else '?'}"
                topo.switches[peer] = "nvswitch"
            counts[peer] = counts.get(peer, 0) + 1
        for peer, n in counts.items():
            topo.nvlinks.append((f"GPU{i}", peer, n))


def text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value) if value is not None else ""


def bus_of(pci: Any) -> str:
    """nvmlPciInfo_t.busId ('00000000:18:00.0', str or bytes) -> '0000:18:00.0'."""
    if pci is None:
        return ""
    raw = getattr(pci, "busId", None) or getattr(pci, "busIdLegacy", None) or ""
    return norm_bus_id(text(raw))


def cpus_of(words: Any) -> str:
    """The 64-bit words of nvmlDeviceGetCpuAffinity -> '0-23,48-71'."""
    if words is None:
        return ""
    cpus = [w * 64 + b for w, word in enumerate(list(words)) for b in range(64) if int(word) >> b & 1]
    return cpu_ranges(cpus)


def init_reason(exc: BaseException) -> str:
    if getattr(exc, "value", None) in NO_DRIVER_CODES:
        return t("no NVIDIA driver ({why})", why=exc)
    return f"NVML: {exc}"


def sweep(nvml: ModuleType | Any | None) -> tuple[Topology | None, str]:
    """(topology, "") or (None, why not), without a deadline."""
    try:
        with opened_nvml(nvml) as nv:
            try:
                topo = Sweep(nv).run()
            except nv.NVMLError as exc:
                return None, f"NVML: {exc}"
            return (topo, "") if topo.gpus else (None, t("NVML sees no GPU"))
    except NvmlUnavailable as why:
        if why.kind == "missing":  # no driver: said without importing pynvml
            return None, t("no NVIDIA driver ({why})", why=why.detail)
        if why.kind == "import":
            return None, t("pynvml (nvidia-ml-py) not importable: {why}", why=why.detail)
        return None, init_reason(why.exc) if why.exc else f"NVML: {why.detail}"


def nvml_topology(nvml: ModuleType | Any | None = None, deadline: float = 5.0) -> tuple[Topology | None, str]:
    """The sweep in a daemon thread: a hung NVML costs `deadline` seconds, never the process."""
    box: dict[str, tuple[Topology | None, str]] = {}

    def work() -> None:
        try:
            box["result"] = sweep(nvml)
        except Exception as exc:  # a pynvml bug or an odd answer must not kill the caller
            box["result"] = (None, f"NVML sweep failed: {type(exc).__name__}: {exc}")

    thread = threading.Thread(target=work, daemon=True, name="nvml-topology")
    thread.start()
    thread.join(deadline)
    if "result" not in box:
        return None, f"NVML did not answer within {deadline:g}s"
    return box["result"]
