"""The live NVML path against a fake pynvml fed from recordings, the nvidia-smi fallback through a
recorded runner, and the real behaviour of this machine."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from runnerkit import RecordedRunner
from topology_fake_nvml import FIXTURES, FakePynvml

from distdoctor.probes import cuda_driver
from distdoctor.probes.base import OK, UNAVAILABLE, WARN, ProbeContext
from distdoctor.probes.topology import analyse, probe_topology
from distdoctor.probes.topology.nvml_source import nvml_topology

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "topology"
CALLED = ["nvmlInit", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetName",
          "nvmlDeviceGetPciInfo", "nvmlDeviceGetP2PStatus", "nvmlDeviceGetTopologyCommonAncestor",
          "nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkRemotePciInfo", "nvmlShutdown"]


def has_gpu_driver() -> bool:
    return os.path.exists("/dev/nvidiactl") or shutil.which("nvidia-smi") is not None


def test_nvswitch_box_follows_the_call_sequence() -> None:
    fake = FakePynvml.load("nvml-hgx-h100-8gpu-nvswitch.json")
    topo, reason = nvml_topology(fake)
    assert reason == "" and topo is not None
    assert fake.calls[:3] == ["nvmlInit", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex"]
    assert fake.calls[-1] == "nvmlShutdown" and set(CALLED) <= set(fake.calls)
    facts = analyse(topo)
    assert (facts["source"], facts["p2p"], facts["nvlink"]) == ("nvml", "all", True)
    assert {p["link"] for p in facts["pairs"]} == {"NV18"} and len(facts["pairs"]) == 28
    gpu0 = facts["gpus"][0]
    assert (gpu0["name"], gpu0["bus_id"], gpu0["numa"], gpu0["cpus"]) == (
        "NVIDIA H100 80GB HBM3", "0000:18:00.0", 0, "0-55,112-167")
    assert [(g["id"], g["gpus"]) for g in facts["numa"]] == [
        (0, ["GPU0", "GPU1", "GPU2", "GPU3"]), (1, ["GPU4", "GPU5", "GPU6", "GPU7"])]
    assert facts["advice"] == []  # NVLink everywhere: rings never cross sockets over SYS


def test_pcie_box_without_p2p_reads_read_write_status() -> None:
    fake = FakePynvml.load("nvml-2gpu-rtx4090-pcie-no-p2p.json")
    topo, reason = nvml_topology(fake)
    assert topo is not None, reason
    facts = analyse(topo)
    assert facts["pairs"] == [{"a": "GPU0", "b": "GPU1", "link": "PHB", "p2p": "GNS",
                               "evidence": "driver: P2P read GNS (GPU not supported)"}]
    assert (facts["p2p"], facts["nvlink"]) == ("none", False)
    assert facts["advice"][0]["env"] == {"NCCL_P2P_DISABLE": "1"}
    # No NVLink: one NvLinkState call per GPU answers NotSupported, and no remote PCI query follows.
    assert fake.calls.count("nvmlDeviceGetNvLinkState") == 2
    assert "nvmlDeviceGetNvLinkRemotePciInfo" not in fake.calls
    assert [g["numa"] for g in facts["gpus"]] == [None, None]  # NumaNodeId NotSupported: no guess


def test_no_driver_is_unavailable_with_the_reason() -> None:
    fake = FakePynvml.load("nvml-no-driver.json")
    assert nvml_topology(fake) == (None, "no NVIDIA driver (NVML Shared Library Not Found)")
    assert fake.calls == ["nvmlInit"]


def test_a_wedged_nvml_costs_the_deadline_only() -> None:
    release = threading.Event()
    fake = FakePynvml.load("nvml-hgx-h100-8gpu-nvswitch.json", block=release)
    try:
        topo, reason = nvml_topology(fake, deadline=0.2)
    finally:
        release.set()  # let the daemon thread finish
    assert topo is None and reason == "NVML did not answer within 0.2s"


def test_probe_merges_nics_from_nvidia_smi_when_nvml_works() -> None:
    fake = FakePynvml.load("nvml-2gpu-rtx4090-pcie-no-p2p.json")
    runner = RecordedRunner({("nvidia-smi", "topo", "-m"): fake.rec["nvidia-smi topo -m"]})
    result = probe_topology(ProbeContext(runner=runner), nvml=fake)
    assert result.status == WARN and result.name == "topology"
    facts = result.facts
    assert facts["source"] == "nvml+topo-m"
    assert [(n["id"], n["name"]) for n in facts["nics"]] == [("NIC0", "mlx5_0")]
    assert facts["gpus"][0]["nic_link"] == "PHB"
    assert json.loads(json.dumps(facts)) == facts  # the --json dict is plain JSON


def test_probe_falls_back_to_nvidia_smi_without_nvml() -> None:
    text = (SAMPLES / "topo-m-and-p2p-r-4gpu-2socket.txt").read_text()
    matrix, _, p2p = text.partition("$ nvidia-smi topo -p2p r\n")
    runner = RecordedRunner({("nvidia-smi", "topo", "-m"): matrix, ("nvidia-smi", "topo", "-p2p", "r"): p2p})
    result = probe_topology(ProbeContext(runner=runner), nvml=FakePynvml.load("nvml-no-driver.json"))
    assert runner.calls == [("nvidia-smi", "topo", "-m"), ("nvidia-smi", "topo", "-p2p", "r")]
    assert result.status == WARN
    assert (result.facts["source"], result.facts["p2p"]) == ("topo-m+topo-p2p", "partial")
    assert any("NVML unavailable (no NVIDIA driver" in n for n in result.facts["notes"])


def test_probe_unavailable_when_no_source_at_all() -> None:
    result = probe_topology(ProbeContext(runner=RecordedRunner({})), nvml=FakePynvml.load("nvml-no-driver.json"))
    assert result.status == UNAVAILABLE
    assert result.reason == ("no NVIDIA driver (NVML Shared Library Not Found); "
                             "nvidia-smi: command not found")


@pytest.mark.skipif(has_gpu_driver(), reason="this host has an NVIDIA driver")
def test_real_pynvml_on_this_machine_is_unavailable() -> None:
    topo, reason = nvml_topology(None)
    assert topo is None and reason.startswith("no NVIDIA driver (")
    result = probe_topology(ProbeContext())  # the real runner: nvidia-smi is not installed here
    assert result.status == UNAVAILABLE and "no NVIDIA driver" in result.reason


@pytest.mark.gpu
def test_real_gpu_node() -> None:
    result = probe_topology(ProbeContext())
    assert result.status in (OK, WARN)
    assert result.facts["gpus"] and result.facts["p2p"] in ("all", "partial", "none", "unknown")


def test_recordings_are_documented() -> None:
    readme = (FIXTURES / "README.md").read_text()
    for path in FIXTURES.glob("nvml-*.json"):
        assert "nvml-*.json" in readme and json.loads(path.read_text())["description"]


def _no_nvml_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader cannot find libnvidia-ml, and importing pynvml would fail loudly if tried."""
    import ctypes

    def cdll(name: str, *args: object, **kwargs: object) -> None:
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` now raises ImportError


def test_no_driver_is_decided_before_importing_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Same reason text as pynvml gives, without its ~30 ms import (and the probe's networkx)."""
    _no_nvml_library(monkeypatch)
    assert nvml_topology(None) == (None, "no NVIDIA driver (NVML Shared Library Not Found)")
    assert cuda_driver.driver_from_nvml(None) == (None, "NVML: NVML Shared Library Not Found")
    result = probe_topology(ProbeContext(runner=RecordedRunner({})))
    assert result.status == UNAVAILABLE
    assert result.reason == "no NVIDIA driver (NVML Shared Library Not Found); nvidia-smi: command not found"


def test_a_loadable_library_still_goes_through_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    monkeypatch.setattr(ctypes, "CDLL", lambda name, *a, **k: object())
    monkeypatch.setitem(sys.modules, "pynvml", None)
    topo, reason = nvml_topology(None)
    assert topo is None and reason.startswith("pynvml (nvidia-ml-py) not importable")


def test_the_probe_imports_no_networkx_until_there_is_a_topology(tmp_path: Path) -> None:
    """A fresh interpreter: the package, the probe on a driverless node, then the lazy names."""
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, TESTS)
        import distdoctor.probes.topology as topology
        from distdoctor.probes.base import ProbeContext
        from runnerkit import RecordedRunner
        result = topology.probe_topology(ProbeContext(runner=RecordedRunner({})), nvml=None)
        print(result.status, 'networkx' in sys.modules)
        from distdoctor.probes.topology import TopologyInputError, build_graph, parse_text
        print(TopologyInputError.__name__, build_graph.__module__, 'networkx' in sys.modules)
    """).replace("TESTS", repr(str(Path(__file__).resolve().parents[1] / "kits")))
    if not cuda_driver.nvml_library_missing():
        pytest.skip("this host has libnvidia-ml: NVML answers and the verdict needs networkx")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert proc.stdout.split("\n")[:2] == [
        "unavailable False", "TopologyInputError distdoctor.probes.topology.graph True"], proc.stderr
