"""Generated fleets for the fleet tests and benchmark: one base snapshot, many hosts, planted outliers."""
from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from distdoctor.probes.base import ProbeContext, ProbeResult
from distdoctor.probes.fleet import snapshot

GIB = 1 << 30
# Facts in the shapes the real probes give them (versions, shm, switches, topology), as a
# 8 x H100 node would report them; the fleet code reads them through summarise().
NODE_FACTS: dict[str, dict[str, Any]] = {
    "versions": {
        "python": {"executable": "/opt/venv/bin/python", "version": "3.11.9",
                   "implementation": "CPython"},
        "glibc": "glibc 2.35", "os": "Ubuntu 22.04.4 LTS", "kernel": "5.15.0-105-generic",
        "torch": {"present": True, "version": "2.13.0+cu128", "cuda": "12.8", "nccl": "2.27.3",
                  "imported": True},
        "nccl": {"loaded": "2.27.3", "loaded_paths": ["/opt/venv/lib/nvidia/nccl/lib/libnccl.so.2"],
                 "versions": ["2.27.3"]},
        "driver": {"source": "nvml", "version": "550.54.15", "cuda": "12.4", "gpu_count": 8},
    },
    "shm": {"path": "/dev/shm", "size_bytes": 64 * GIB, "free_bytes": 63 * GIB},
    "launch": {"launcher": "none", "variables": {}},
    "switches": {"variables": {"NCCL_DEBUG": {"value": "WARN", "source": "env"},
                               "NCCL_SOCKET_IFNAME": {"value": "=ens1", "source": "/etc/nccl.conf"}}},
    "network": {"interfaces": [{"name": "ens1", "state": "up", "mtu": 9000,
                                "addresses": ["10.0.0.1/16"]}], "rdma": ["mlx5_0"]},
    "topology": {"source": "nvml", "gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3"}
                                            for i in range(8)],
                 "p2p": "usable", "nvlink": True},
}


def fake_probes(facts: Mapping[str, Mapping[str, Any]] = NODE_FACTS) -> dict[str, Any]:
    """Probes that answer with recorded facts (there are no GPUs on the test machine)."""
    return {name: (lambda ctx, name=name, f=f: ProbeResult(name, "ok", MappingProxyType(dict(f))))
            for name, f in facts.items()}


def base_snapshot(facts: Mapping[str, Mapping[str, Any]] = NODE_FACTS) -> dict[str, Any]:
    return snapshot(ProbeContext(), probes=fake_probes(facts))


def node_name(i: int) -> str:
    return f"node-{i:02d}"


def write_fleet(directory: Path, n: int, plants: Mapping[int, Mapping[str, Any]] | None = None,
                base: dict[str, Any] | None = None, indent: int | None = 1) -> list[Path]:
    """n snapshot files node-00.json..., each a copy of `base` with its own host and time;
    plants[i] overrides summary fields of node i ("switches" merges into the switches)."""
    base = base or base_snapshot()
    directory.mkdir(parents=True, exist_ok=True)
    text = json.dumps(base, indent=indent)
    paths = []
    for i in range(n):
        if plants and i in plants:
            doc = copy.deepcopy(base)
            for field, value in plants[i].items():
                if field == "switches":
                    doc["summary"]["switches"].update(value)
                else:
                    doc["summary"][field] = value
            body = json.dumps(doc, indent=indent)
        else:
            body = text
        # vary host and time on the text, as a real fleet's files differ
        body = body.replace(f'"host": {json.dumps(base["host"])}',
                            f'"host": "{node_name(i)}"', 1)
        body = body.replace(base["time"], f"2026-03-01T12:{i // 60 % 60:02d}:{i % 60:02d}.000Z", 1)
        path = directory / f"{node_name(i)}.json"
        path.write_text(body)
        paths.append(path)
    return paths
