"""Versions probe: the real target interpreters, a stand-in CUDA torch, NVML fakes, /proc recordings."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import version as dist_version
from pathlib import Path

import pytest
from runnerkit import RecordedRunner

from distdoctor.probes import cuda_driver
from distdoctor.probes.base import ProbeContext
from distdoctor.probes.runner import CommandResult
from distdoctor.probes.versions import MARKER, SNIPPET, STARTED, probe_versions

PROC_VERSION = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
                "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")


class FakeNVML:
    """pynvml's surface as the probe uses it; answers from a recorded driver."""

    class NVMLError(Exception):
        pass

    def __init__(self, driver: str | None, cuda: int = 12020, gpus: int = 8) -> None:
        self.driver, self.cuda, self.gpus, self.shutdown = driver, cuda, gpus, False

    def nvmlInit(self) -> None:
        if self.driver is None:
            raise self.NVMLError("NVML Shared Library Not Found")

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver or ""

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        return self.gpus

    def nvmlShutdown(self) -> None:
        self.shutdown = True


def _python_without_torch() -> str | None:
    for candidate in ("/usr/bin/python3", shutil.which("python3") or ""):
        if candidate and os.path.isfile(candidate) and candidate != sys.executable:
            probe = subprocess.run([candidate, "-c", "import importlib.util as u; "
                                    "print(u.find_spec('torch') is None)"],
                                   capture_output=True, text=True, timeout=30)
            if probe.stdout.strip() == "True":
                return candidate
    return None


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed (no 2.13 wheel for 3.10)")
def test_venv_interpreter_reports_its_cpu_torch_without_importing_it() -> None:
    result = probe_versions(ProbeContext(timeout=60), nvml=FakeNVML(None))
    assert result.status == "ok", result.reason
    torch = result.facts["torch"]
    assert torch["present"] is True
    assert torch["version"] == dist_version("torch")
    assert torch["cuda"] is None
    # A CPU build has no NCCL to ask about: version.py is read, torch is not imported.
    assert torch["imported"] is False
    assert result.facts["python"]["executable"] == sys.executable
    assert result.facts["glibc"].startswith("glibc ")


def test_second_interpreter_without_torch_reports_it_absent() -> None:
    other = _python_without_torch()
    if other is None:
        pytest.skip("no interpreter without torch on this machine")
    result = probe_versions(ProbeContext(python=other, timeout=60), nvml=FakeNVML(None))
    assert result.status == "ok", result.reason
    assert result.facts["torch_present"] is False
    assert result.facts["torch"] == {"present": False}
    assert result.facts["python"]["executable"] in (other, os.path.realpath(other))


def _fake_cuda_torch(site: Path, nccl: object) -> None:
    """A stand-in torch package with a CUDA 12.8 version.py whose cuda module records any init."""
    pkg = site / "torch"
    (pkg / "cuda").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import version, cuda\n__version__ = version.__version__\n")
    (pkg / "version.py").write_text("__version__ = '2.13.0+cu128'\ncuda = '12.8'\nhip = None\n"
                                     "git_version = 'abc'\n")
    (pkg / "cuda" / "__init__.py").write_text(
        "from . import nccl\n_initialized = False\n"
        "def is_initialized():\n    return _initialized\n"
        "def init():\n    global _initialized\n    _initialized = True\n"
        "def is_available():\n    init()\n    return True\n")
    (pkg / "cuda" / "nccl.py").write_text(f"def version():\n    return {nccl!r}\n")
    dist = site / "nvidia_nccl_cu12-2.26.2.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-nccl-cu12\nVersion: 2.26.2\n")
    lib = site / "nvidia" / "nccl" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnccl.so.2").write_bytes(b"")


@pytest.mark.parametrize("nccl", [(2, 26, 2), 22602])
def test_cuda_build_is_imported_for_nccl_without_initialising_cuda(tmp_path: Path, nccl: object) -> None:
    _fake_cuda_torch(tmp_path / "site", nccl)
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    root = tmp_path / "root"
    syslib = root / "usr/lib/x86_64-linux-gnu"
    syslib.mkdir(parents=True)
    (syslib / "libnccl.so.2.18.3").write_bytes(b"")
    os.symlink("libnccl.so.2.18.3", syslib / "libnccl.so.2")
    ctx = ProbeContext(root=root, env=env, timeout=60)
    result = probe_versions(ctx, nvml=FakeNVML("570.86.15", cuda=12080))
    assert result.status == "ok", result.reason
    torch = result.facts["torch"]
    assert (torch["imported"], torch["cuda"], torch["nccl"]) == (True, "12.8", "2.26.2")
    assert torch["cuda_initialized"] is False
    nccl_facts = result.facts["nccl"]
    assert nccl_facts["packages"] == [{"name": "nvidia-nccl-cu12", "version": "2.26.2"}]
    assert nccl_facts["versions"] == ["2.18.3", "2.26.2"]
    assert result.facts["two_nccls"] is True
    assert "/usr/lib/x86_64-linux-gnu/libnccl.so.2.18.3 2.18.3 (system)" in result.facts["nccl_builds_text"]
    assert result.facts["driver_too_old"] is False
    assert result.facts["driver_minor_compat_only"] is False


def test_snippet_never_asks_cuda_to_initialise() -> None:
    # is_available()/device_count() create a CUDA context on some builds; NCCL's version does not.
    for call in ("is_available(", "device_count(", "cuda.init(", "set_device("):
        assert call not in SNIPPET


def _recorded(python: str, answer: dict) -> RecordedRunner:
    return RecordedRunner({(python, "-c", SNIPPET): f"noise\n{MARKER}{json.dumps(answer)}\n"})


ANSWER = {"python": {"executable": "/opt/venv/bin/python", "version": "3.11.7"}, "glibc": "glibc 2.35",
          "nccl_packages": [], "nccl_libs": [],
          "torch": {"present": True, "version": "2.13.0+cu128", "cuda": "12.8", "nccl": "2.26.2",
                    "imported": True}}


@pytest.mark.parametrize("driver,too_old,compat_only", [
    ("470.223.02", True, False),     # 11.x driver, CUDA 12 build: cannot run
    ("525.60.13", False, True),      # 12.x minor version compatibility only
    ("570.124.06", False, False),
])
def test_driver_against_cuda_build(driver: str, too_old: bool, compat_only: bool) -> None:
    ctx = ProbeContext(runner=_recorded(sys.executable, ANSWER), root=Path("/nonexistent-root"))
    result = probe_versions(ctx, nvml=FakeNVML(driver, cuda=12000))
    assert result.facts["driver"]["version"] == driver
    assert result.facts["driver_too_old"] is too_old
    assert result.facts["driver_minor_compat_only"] is compat_only
    if too_old:
        assert result.facts["driver_min_required"] == "525.60.13"


def test_driver_falls_back_to_proc_when_nvml_fails(tmp_path: Path) -> None:
    (tmp_path / "proc/driver/nvidia").mkdir(parents=True)
    (tmp_path / "proc/driver/nvidia/version").write_text(PROC_VERSION)
    nvml = FakeNVML(None)
    ctx = ProbeContext(runner=_recorded(sys.executable, ANSWER), root=tmp_path)
    result = probe_versions(ctx, nvml=nvml)
    assert result.facts["driver"] == {"source": "/proc/driver/nvidia/version",
                                      "version": "535.104.05", "cuda": "12.2"}
    assert result.facts["driver_minor_compat_only"] is True  # 12.8 wants 570.26


def test_no_driver_with_cuda_build_is_a_fact_not_a_crash(tmp_path: Path) -> None:
    ctx = ProbeContext(runner=_recorded(sys.executable, ANSWER), root=tmp_path)
    result = probe_versions(ctx, nvml=FakeNVML(None))
    assert result.facts["driver"]["source"] == "none"
    assert "NVML Shared Library Not Found" in result.facts["driver"]["reason"]
    assert result.facts["cuda_build_without_driver"] is True
    assert "driver_too_old" not in result.facts


def test_missing_interpreter_is_unavailable() -> None:
    result = probe_versions(ProbeContext(python="/no/such/python"), nvml=FakeNVML(None))
    assert result.status == "unavailable"
    assert "interpreter not found: /no/such/python" in result.reason


@pytest.mark.parametrize("answer,reason", [
    (CommandResult((), None, "", "", 5.0, "python: timed out after 5s"), "timed out after 5s"),
    (CommandResult((), 1, "", "Traceback...\nSyntaxError: bad\n", 0.1), "exited 1: SyntaxError: bad"),
    (f"{MARKER}{{not json", "unreadable answer"),
])
def test_target_failures_are_unavailable_with_reason(answer: object, reason: str) -> None:
    runner = RecordedRunner({(sys.executable, "-c", SNIPPET): answer})
    result = probe_versions(ProbeContext(runner=runner), nvml=FakeNVML(None))
    assert result.status == "unavailable"
    assert reason in result.reason


def test_nvml_is_shut_down_after_use() -> None:
    nvml = FakeNVML("550.54.14")
    facts, why = cuda_driver.driver_from_nvml(nvml)
    assert why == "" and facts == {"source": "nvml", "version": "550.54.14", "cuda": "12.2",
                                   "gpu_count": 8}
    assert nvml.shutdown


@pytest.mark.parametrize("driver,cuda", [("440.33", "10.2"), ("535.104.05", "12.2"),
                                         ("570.86.15", "12.8"), ("580.65.06", "13.0"),
                                         ("390.12", None)])
def test_max_cuda_for_driver(driver: str, cuda: str | None) -> None:
    assert cuda_driver.max_cuda_for(driver) == cuda


def test_cuda_build_that_fails_to_import_is_a_failed_check(tmp_path: Path) -> None:
    from distdoctor.knowledge import load_knowledge
    from distdoctor.knowledge.evaluate import evaluate

    pkg = tmp_path / "site" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "version.py").write_text("__version__ = '2.13.0+cu128'\ncuda = '12.8'\n")
    (pkg / "__init__.py").write_text(
        "raise ImportError('libcudart.so.12: cannot open shared object file')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    result = probe_versions(ProbeContext(env=env, root=tmp_path, timeout=60), nvml=FakeNVML(None))
    assert result.facts["torch_broken"] is True
    found = {f.check: f for f in evaluate(load_knowledge(use_env=False), {"versions": result})}
    assert found["torch-import-fails"].status == "fail"
    assert found["torch-import-fails"].detail == (
        "ImportError: libcudart.so.12: cannot open shared object file")
    # a CPU build is never imported, so whether it imports is not claimed either way
    cpu = probe_versions(ProbeContext(timeout=60), nvml=FakeNVML(None))
    assert "torch_broken" not in cpu.facts


@pytest.mark.parametrize("answer, started, why", [
    # a shell wrapper that hangs: killed at the timeout, and no Python ever ran
    (CommandResult((), None, "", "", 5.0, f"{sys.executable}: timed out after 5s"), False,
     "timed out after 5s"),
    # Python ran the snippet, then `import torch` hung: a fact about the target, not bad usage
    (CommandResult((), None, f"{STARTED}\n", "", 5.0, f"{sys.executable}: timed out after 5s"), True,
     "timed out after 5s"),
    (CommandResult((), 0, "", "", 0.1), False, "exited 0: no output"),  # /bin/true
])
def test_whether_the_interpreter_ran_python_is_a_fact(answer: CommandResult, started: bool,
                                                      why: str) -> None:
    runner = RecordedRunner({(sys.executable, "-c", SNIPPET): answer})
    result = probe_versions(ProbeContext(runner=runner), nvml=FakeNVML(None))
    assert result.status == "unavailable"
    assert result.facts == {"interpreter_started": started, "interpreter_error": why}
    assert result.reason == f"could not ask {sys.executable}: {why}"  # the path once came twice


def test_snippet_announces_itself_before_any_import() -> None:
    proc = subprocess.run([sys.executable, "-c", SNIPPET], capture_output=True, text=True, timeout=120)
    assert proc.stdout.startswith(f"{STARTED}\n") and f"\n{MARKER}" in proc.stdout


def test_the_driver_table_is_data_checked_on_load() -> None:
    assert cuda_driver.TOOLKIT_MIN_DRIVER[(12, 4)] == "550.54.14" and cuda_driver.MAJOR_MIN_DRIVER[12] == "525.60.13"
    good = '[toolkit]\n"12.4" = "550.54.14"\n[major]\n"12" = "525.60.13"\n'
    assert cuda_driver.parse_drivers(good) == ({(12, 4): "550.54.14"}, {12: "525.60.13"})
    for bad in (good.replace('"12.4"', '"twelve"'), good.replace('"525.60.13"', '"new"'),
                good.replace('"12" =', '"12.1" ='), '[toolkit]\n"12.4" = "550.54.14"\n'):
        with pytest.raises(ValueError, match="cuda_drivers.toml"):
            cuda_driver.parse_drivers(bad)
