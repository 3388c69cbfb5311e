"""A fake `pynvml` answering from a recording (tests/fixtures/topology/nvml-*.json), call by call."""
from __future__ import annotations

import json
import threading
import types
from pathlib import Path
from typing import Any

import pynvml

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "topology"
ERRORS = {"InvalidArgument": pynvml.NVML_ERROR_INVALID_ARGUMENT,
          "NotSupported": pynvml.NVML_ERROR_NOT_SUPPORTED,
          "NoPermission": pynvml.NVML_ERROR_NO_PERMISSION}


def cpu_words(cpus: str, words: int) -> list[int]:
    out = [0] * words
    for part in filter(None, cpus.split(",")):
        lo, _, hi = part.partition("-")
        for cpu in range(int(lo), int(hi or lo) + 1):
            out[cpu // 64] |= 1 << (cpu % 64)
    return out


class Handle:
    def __init__(self, index: int) -> None:
        self.index = index


class FakePynvml(types.ModuleType):
    """Same names, argument order and return types as pynvml; NVMLError is pynvml's own class."""

    NVMLError = pynvml.NVMLError
    NVML_FEATURE_ENABLED = pynvml.NVML_FEATURE_ENABLED
    NVML_NVLINK_MAX_LINKS = pynvml.NVML_NVLINK_MAX_LINKS

    def __init__(self, recording: dict[str, Any], block: threading.Event | None = None) -> None:
        super().__init__("pynvml")
        self.rec = recording
        self.calls: list[str] = []
        self.block = block
        self.ready = False

    @classmethod
    def load(cls, name: str, **kwargs: Any) -> FakePynvml:
        return cls(json.loads((FIXTURES / name).read_text()), **kwargs)

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if name != "nvmlInit" and not self.ready:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)

    def _dev(self, handle: Handle) -> dict[str, Any]:
        return self.rec["devices"][handle.index]

    def nvmlInit(self) -> None:
        self._call("nvmlInit")
        if "init_error" in self.rec:
            raise pynvml.NVMLError(self.rec["init_error"])
        self.ready = True

    def nvmlShutdown(self) -> None:
        self._call("nvmlShutdown")
        self.ready = False

    def nvmlDeviceGetCount(self) -> int:
        self._call("nvmlDeviceGetCount")
        if self.block is not None:
            self.block.wait()  # a wedged GPU: NVML does not answer
        return len(self.rec["devices"])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Handle:
        self._call("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.rec["devices"]):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return Handle(index)

    def nvmlDeviceGetName(self, handle: Handle) -> str:
        self._call("nvmlDeviceGetName")
        return self._dev(handle)["name"]

    def nvmlDeviceGetPciInfo(self, handle: Handle) -> types.SimpleNamespace:
        self._call("nvmlDeviceGetPciInfo")
        bus = self._dev(handle)["busId"]
        return types.SimpleNamespace(busId=bus, busIdLegacy=bus[4:])

    def nvmlDeviceGetNumaNodeId(self, handle: Handle) -> int:
        self._call("nvmlDeviceGetNumaNodeId")
        value = self._dev(handle).get("numa", "NotSupported")
        if isinstance(value, str):
            raise pynvml.NVMLError(ERRORS[value])
        return value

    def nvmlDeviceGetCpuAffinity(self, handle: Handle, words: int) -> list[int]:
        self._call("nvmlDeviceGetCpuAffinity")
        return cpu_words(self._dev(handle)["cpuAffinity"], words)

    def _link(self, handle: Handle, link: int) -> dict[str, Any]:
        nvlink = self._dev(handle)["nvlink"]
        if "error" in nvlink:
            raise pynvml.NVMLError(ERRORS[nvlink["error"]])
        if link >= len(nvlink["state"]):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return nvlink

    def nvmlDeviceGetNvLinkState(self, handle: Handle, link: int) -> int:
        self._call("nvmlDeviceGetNvLinkState")
        return self._link(handle, link)["state"][link]

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: Handle, link: int) -> types.SimpleNamespace:
        self._call("nvmlDeviceGetNvLinkRemotePciInfo")
        return types.SimpleNamespace(busId=self._link(handle, link)["remote"][link])

    def nvmlDeviceGetP2PStatus(self, h1: Handle, h2: Handle, index: int) -> int:
        self._call("nvmlDeviceGetP2PStatus")
        kind = {0: "read", 1: "write", 2: "nvlink"}[index]  # nvmlGpuP2PCapsIndex_t
        return self.rec["p2p"][kind][h1.index][h2.index]

    def nvmlDeviceGetTopologyCommonAncestor(self, h1: Handle, h2: Handle) -> int:
        self._call("nvmlDeviceGetTopologyCommonAncestor")
        return self.rec["ancestor"][h1.index][h2.index]
