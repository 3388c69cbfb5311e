"""Shared-memory probe: /dev/shm size and free space, the container runtime, and its fix."""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from ..knowledge.units import human_size as human
from .base import OK, ProbeContext, ProbeResult, unavailable
from .procenv import EnvUnreadable, target_env

NAME = "shm"
# The probe measures; checks.toml (shm-too-small, shm-nearly-full) holds the limits it is judged by.

FIXES = {
    "docker": "docker run --shm-size=16g ...   # or: docker run --ipc=host ...",
    "podman": "podman run --shm-size=16g ...   # or: podman run --ipc=host ...",
    "containerd": "nerdctl run --shm-size=16g ...   # or: nerdctl run --ipc=host ...",
    "kubernetes": ("volumes: [{name: dshm, emptyDir: {medium: Memory, sizeLimit: 16Gi}}]  "
                   "# and in the container: volumeMounts: [{name: dshm, mountPath: /dev/shm}]"),
    "none": "sudo mount -o remount,size=16G /dev/shm",
}
_CGROUP_MARKERS = (("kubepods", "kubernetes"), ("libpod", "podman"), ("docker", "docker"),
                   ("containerd", "containerd"), ("cri-o", "containerd"), ("crio", "containerd"))


def detect_container(ctx: ProbeContext, env: Mapping[str, str]) -> dict[str, Any]:
    """Which runtime (kubernetes, podman, docker, containerd or none) and the evidence for it."""
    evidence: list[str] = []
    found: list[str] = []
    if env.get("KUBERNETES_SERVICE_HOST"):
        found.append("kubernetes")
        evidence.append("KUBERNETES_SERVICE_HOST is set")
    if ctx.path("/run/.containerenv").exists():
        found.append("podman")
        evidence.append("/run/.containerenv exists")
    if ctx.path("/.dockerenv").exists():
        found.append("docker")
        evidence.append("/.dockerenv exists")
    cgroup = ctx.read_text("/proc/1/cgroup") or ""
    for marker, runtime in _CGROUP_MARKERS:
        if marker in cgroup:
            found.append(runtime)
            evidence.append(f"/proc/1/cgroup mentions {marker}")
            break
    # Kubernetes wins over the runtime under it: the pod spec is where /dev/shm gets fixed.
    order = ("kubernetes", "podman", "docker", "containerd")
    runtime = next((r for r in order if r in found), "none")
    return {"runtime": runtime, "in_container": runtime != "none", "evidence": evidence}


def probe_shm(ctx: ProbeContext, *,
              statvfs: Callable[[str], os.statvfs_result] = os.statvfs) -> ProbeResult:
    """statvfs of /dev/shm under ctx.root, the container runtime, and the fix for it."""
    try:
        env = target_env(ctx)
    except EnvUnreadable as exc:
        return unavailable(NAME, str(exc))
    path = ctx.path("/dev/shm")
    if not path.is_dir():
        return unavailable(NAME, "no /dev/shm on this system")
    try:
        st = statvfs(str(path))
    except OSError as exc:
        return unavailable(NAME, f"statvfs /dev/shm: {exc.strerror or exc}")
    size = st.f_blocks * st.f_frsize
    free = st.f_bavail * st.f_frsize
    container = detect_container(ctx, env)
    facts: dict[str, Any] = {
        "path": "/dev/shm",
        "size_bytes": size,
        "free_bytes": free,
        "used_bytes": size - st.f_bfree * st.f_frsize,
        "size_human": human(size),
        "free_human": human(free),
        "container": container,
        "runtime": container["runtime"],
        "fix": FIXES[container["runtime"]],
    }
    return ProbeResult(NAME, OK, MappingProxyType(facts))
