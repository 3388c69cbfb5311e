"""Shm probe over recorded roots (sizes from a fake statvfs) and over the real /dev/shm."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.evaluate import evaluate
from distdoctor.probes.base import ProbeContext
from distdoctor.probes.shm import probe_shm

RECORDED = Path(__file__).parents[1] / "fixtures" / "probes" / "vm-docker"
MB = 1 << 20


def fake_statvfs(size: int, free: int):
    def statvfs(path: str) -> os.statvfs_result:
        # f_bsize, f_frsize, f_blocks, f_bfree, f_bavail, f_files, f_ffree, f_favail, f_flag, f_namemax
        return os.statvfs_result((4096, 4096, size // 4096, free // 4096, free // 4096,
                                  0, 0, 0, 0, 255))
    return statvfs


def _root(tmp_path: Path, *, marker: str | None = None, cgroup: str = "0::/\n") -> Path:
    root = tmp_path / "root"
    (root / "dev/shm").mkdir(parents=True)
    (root / "proc/1").mkdir(parents=True)
    (root / "proc/1/cgroup").write_text(cgroup)
    if marker:
        (root / marker).parent.mkdir(parents=True, exist_ok=True)
        (root / marker).write_text("")
    return root


def test_recorded_docker_host_with_64mb_shm_fails_with_docker_fix() -> None:
    ctx = ProbeContext(root=RECORDED, env={})
    result = probe_shm(ctx, statvfs=fake_statvfs(64 * MB, 60 * MB))
    facts = result.facts
    # the probe measures; the 1 GiB minimum is checks.toml's
    assert (facts["size_bytes"], facts["runtime"], facts["size_human"]) == (64 * MB, "docker", "64.0 MiB")
    assert "too_small" not in facts
    assert facts["container"]["evidence"] == ["/.dockerenv exists"]
    assert "docker run --shm-size=16g" in facts["fix"]
    findings = {f.check: f for f in evaluate(load_knowledge(use_env=False), {"shm": result})}
    assert findings["shm-too-small"].status == "fail"
    assert findings["shm-too-small"].cause_ids == ("shm-insufficient",)
    assert findings["shm-too-small"].fix.startswith("docker run --shm-size=16g")
    assert findings["shm-too-small"].title == "/dev/shm is only 64.0 MiB (runtime: docker)"
    assert "need more than 1.0 GiB;" in findings["shm-too-small"].detail
    assert findings["shm-nearly-full"].status == "ok"  # too small already says it; not also "nearly full"


@pytest.mark.parametrize("marker,cgroup,env,runtime,fix", [
    (None, "0::/\n", {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, "kubernetes", "medium: Memory"),
    (None, "12:pids:/kubepods/burstable/pod1/abc\n", {}, "kubernetes", "emptyDir"),
    ("run/.containerenv", "0::/\n", {}, "podman", "podman run --shm-size=16g"),
    (None, "0::/system.slice/containerd.service/abc\n", {}, "containerd", "nerdctl run --shm-size"),
    (".dockerenv", "0::/\n", {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, "kubernetes", "emptyDir"),
    (None, "0::/init.scope\n", {}, "none", "mount -o remount,size=16G /dev/shm"),
])
def test_runtime_detection_and_its_fix(tmp_path: Path, marker: str | None, cgroup: str,
                                       env: dict, runtime: str, fix: str) -> None:
    ctx = ProbeContext(root=_root(tmp_path, marker=marker, cgroup=cgroup), env=env)
    result = probe_shm(ctx, statvfs=fake_statvfs(64 * MB, 64 * MB))
    assert result.facts["runtime"] == runtime
    assert fix in result.facts["fix"]
    assert result.facts["container"]["in_container"] is (runtime != "none")


def test_large_but_nearly_full_shm_warns(tmp_path: Path) -> None:
    ctx = ProbeContext(root=_root(tmp_path), env={})
    result = probe_shm(ctx, statvfs=fake_statvfs(16 << 30, 100 * MB))
    assert (result.facts["size_bytes"], result.facts["free_bytes"]) == (16 << 30, 100 * MB)
    statuses = {f.check: f.status for f in evaluate(load_knowledge(use_env=False), {"shm": result})}
    assert statuses == {"shm-too-small": "ok", "shm-nearly-full": "warn"}


def _site(tmp_path: Path, minimum: int) -> Path:
    """A site overlay whose shm-too-small is the packaged one with another minimum (an overlay's
    entry replaces the packaged entry of the same id, so it is written whole)."""
    site = tmp_path / "site"
    site.mkdir()
    check = load_knowledge(use_env=False).checks["shm-too-small"]
    fields = {"id": check.id, "probe": check.probe, "fact": check.fact, "op": check.op, "value": minimum,
              "status": check.status, "title": check.title, "detail": check.detail,
              "cause_ids": list(check.cause_ids), "fix": check.fix, "ok_title": check.ok_title}
    (site / "checks.toml").write_text("[[check]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in fields.items()),
                                      encoding="utf-8")
    return site


def test_a_site_overlay_moves_the_minimum(tmp_path: Path) -> None:
    """The threshold is data: a site that wants 32 GiB fails a 16 GiB /dev/shm the packaged
    knowledge passes, and the finding quotes the site's minimum."""
    result = probe_shm(ProbeContext(root=_root(tmp_path), env={}), statvfs=fake_statvfs(16 << 30, 16 << 30))
    packaged = {f.check: f for f in evaluate(load_knowledge(use_env=False), {"shm": result})}
    site = {f.check: f for f in evaluate(load_knowledge(_site(tmp_path, 32 << 30), use_env=False),
                                          {"shm": result})}
    assert packaged["shm-too-small"].status == "ok"
    assert site["shm-too-small"].status == "fail"
    assert "need more than 32.0 GiB;" in site["shm-too-small"].detail
    assert site["shm-nearly-full"].status == "ok"  # it yields to the site's shm-too-small


def test_missing_dev_shm_is_unavailable(tmp_path: Path) -> None:
    result = probe_shm(ProbeContext(root=tmp_path, env={}))
    assert result.status == "unavailable"
    assert result.reason == "no /dev/shm on this system"


def test_statvfs_error_is_unavailable_with_reason(tmp_path: Path) -> None:
    def broken(path: str) -> os.statvfs_result:
        raise PermissionError(13, "Permission denied")

    result = probe_shm(ProbeContext(root=_root(tmp_path), env={}), statvfs=broken)
    assert (result.status, result.reason) == ("unavailable", "statvfs /dev/shm: Permission denied")


def test_real_dev_shm_matches_statvfs() -> None:
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here")
    st = os.statvfs("/dev/shm")
    result = probe_shm(ProbeContext(env={}))
    assert result.facts["size_bytes"] == st.f_blocks * st.f_frsize
    assert result.facts["free_bytes"] == st.f_bavail * st.f_frsize
    assert result.facts["runtime"] in ("docker", "podman", "containerd", "kubernetes", "none")
