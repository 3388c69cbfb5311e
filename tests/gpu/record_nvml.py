"""Records the NVML answers the topology probe asks for, in the order it asks, as JSON."""
from __future__ import annotations

import json
import sys

import pynvml


def call(fn, *args):
    try:
        value = fn(*args)
    except pynvml.NVMLError as exc:
        return {"error": str(exc)}
    if isinstance(value, bytes):
        value = value.decode()
    if hasattr(value, "busId"):
        value = {"busId": value.busId.decode() if isinstance(value.busId, bytes) else value.busId}
    return {"value": value if isinstance(value, (int, str, float, list)) else str(value)}


def main(path: str) -> None:
    pynvml.nvmlInit()
    out: dict = {"driver": call(pynvml.nvmlSystemGetDriverVersion),
                 "cuda_driver": call(pynvml.nvmlSystemGetCudaDriverVersion), "devices": []}
    count = pynvml.nvmlDeviceGetCount()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    for i, h in enumerate(handles):
        dev = {"index": i, "name": call(pynvml.nvmlDeviceGetName, h),
               "pci": call(pynvml.nvmlDeviceGetPciInfo, h),
               "numa": call(getattr(pynvml, "nvmlDeviceGetNumaNodeId", lambda h: None), h),
               "nvlink": [{"link": link, "state": call(pynvml.nvmlDeviceGetNvLinkState, h, link),
                           "remote": call(pynvml.nvmlDeviceGetNvLinkRemotePciInfo, h, link)}
                          for link in range(18)],
               "pairs": []}
        for j, other in enumerate(handles):
            if i != j:
                dev["pairs"].append({"peer": j,
                                     "ancestor": call(pynvml.nvmlDeviceGetTopologyCommonAncestor, h, other),
                                     "p2p_read": call(pynvml.nvmlDeviceGetP2PStatus, h, other, 0),
                                     "p2p_write": call(pynvml.nvmlDeviceGetP2PStatus, h, other, 1),
                                     "p2p_nvlink": call(pynvml.nvmlDeviceGetP2PStatus, h, other, 3)})
        out["devices"].append(dev)
    pynvml.nvmlShutdown()
    with open(path, "w") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
