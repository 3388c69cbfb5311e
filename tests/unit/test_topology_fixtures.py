"""Every real `topo`/NCCL output in ../shared/fixtures/topology parses, with the right GPU count, and
every verdict agrees with its label wherever the input itself can show it."""
from __future__ import annotations

import json

import pytest
from fixturekit import SHARED_FIXTURES, shared_fixtures

from distdoctor.probes.topology import load_input

# name: (GPUs, p2p verdict, nvlink verdict, why). GPU counts come from each label's `hardware` or
# `notes`; where the stored excerpt is cut short of the machine, the count is what the excerpt
# names and the reason says so. Verdicts equal the label where the input can show it; "unknown"/None
# where it cannot (a topo -m matrix without NVLink never shows P2P support).
EXPECTED: dict[str, tuple[int, str, bool | None, str]] = {
    "01-gtx1080ti-x2-desktop-phb": (2, "unknown", False, "hardware: 2x GTX 1080 Ti; PHB matrix"),
    "02-a100-sxm-x8-nv12-17nics": (8, "all", True, "hardware: 8x A100 SXM; NV12 every pair"),
    "03-a10-pcie-x4-sys-mlx5": (4, "unknown", False, "hardware: 4x A10; SYS matrix"),
    "04-azure-ndv4-a100x8-amd-rome-topofile": (
        8, "unknown", None, "hardware: 8x A100 SXM4; a hand-written topo file without <gpu> elements "
        "does not describe NVLink (the label's true comes from outside the file)"),
    "05-azure-ndv5-h100x8-intel-spr-topofile": (
        8, "unknown", None, "hardware: 8x H100 SXM; same kind of file as 04"),
    "06-azure-ncv4-a100pcie-x4-amd-milan-topofile": (
        4, "unknown", None, "hardware: 4x A100 PCIe; NVLink entries point at the GPU itself (placeholders)"),
    "07-alcf-polaris-a100x4-nv4-amd-4numa": (4, "all", True, "hardware: 4x A100 SXM4; NV4 every pair"),
    "08-ibm-cloud-h100x8-vsi-spr-ncclxml": (8, "all", True, "hardware: 8x H100 SXM5; NVLinks to 4 NVSwitches"),
    "09-h200x8-baremetal-spr-ncclxml-partial": (
        3, "all", True, "hardware: 8x H200, but notes: the dump ends after the NUMA-1 switch; it names "
        "GPUs 0-2, all on NVSwitches"),
    "12-rtx5090x2-threadripper-phb": (
        2, "unknown", False, "hardware: 2x RTX 5090; the label's false comes from a p2p matrix not in this file"),
    "15-h100x8-nv18-9nics-vm-partial": (8, "all", True, "hardware: 8x H100 SXM; all GPU rows present, NV18"),
    "18-rtx-a4000x3-pix-phb-stall": (
        3, "unknown", False, "hardware: 3x RTX A4000; the label's false comes from the hang, not the matrix"),
    "21-rtx50-x5-epyc-node-phb-patched": (
        5, "unknown", False, "hardware: 5 RTX 50-series; the label's true comes from a p2p matrix not here"),
    "24-rtx3090x2-phb-patched": (2, "unknown", False, "hardware: 2x RTX 3090; same as 21"),
    "27-tesla-t4x4-2socket-sys-node": (4, "unknown", False, "hardware: 4x Tesla T4; SYS/NODE matrix"),
    "30-rtx4090x2-shm-direct-after-p2p-disable": (
        2, "unknown", None, "notes: 2 GPUs in the run; the excerpt is one SHM channel line and not the "
        "NCCL_P2P_DISABLE=1 that caused it: SHM alone is NCCL's usual choice on many hosts, no proof"),
    "33-hgx-a100-no-ibverbs-net-socket-topo": (
        1, "unknown", True, "hardware: an 8-GPU node, but the excerpt ends at the first GPU of NCCL's "
        "printed topology (GPU/E000); its totalWidth 252 is more than PCIe carries: NVLink"),
    "36-h100x8-k8s-p2p-cumem-unhandled-cuda-error": (
        8, "all", None, "hardware: 8x H100; lines name devices 0, 3, 4, 7 (ordinals are dense); P2P/CUMEM "
        "on every connection shown; the lines do not show NVLink"),
    "39-gtx1080ti-x4-nccl248-socket-hang": (
        4, "unknown", None, "hardware: 4x GTX 1080 Ti; no pair's transport is in the excerpt"),
    "42-azure-ncv4-a100-topo-file-graph-import-error": (1, "unknown", None, "hardware: 1x A100 PCIe visible"),
    "45-dgx1-v100-ncclxml-partial": (
        6, "all", True, "hardware: DGX-1V (8 GPUs), but the excerpt ends inside GPU1: it names 6 (2 described, "
        "4 as NVLink peers of class GPU), all joined by NVLink (NV1/NV2, NVB through a GPU)"),
    "48-4gpu-2socket-node-sys-4nic-pix": (4, "unknown", False, "hardware: 4 GPUs; NODE/SYS matrix"),
    "51-mixed-4090-a6000-4gpu-phb": (4, "unknown", False, "hardware: 4 mixed GPUs; PHB matrix"),
    "54-hgx-h100-4gpu-nv6-4nic-pix-vm": (4, "all", True, "hardware: HGX H100 4-GPU; NV6 every pair"),
}
FOLDER = SHARED_FIXTURES / "topology"
NAMES = sorted(p.stem for p in FOLDER.glob("*.txt")) if FOLDER.is_dir() else ["(shared fixtures absent)"]
LABEL_P2P = {True: {"all"}, False: {"none", "partial"}}


@pytest.mark.parametrize("name", NAMES)
def test_fixture_parses_with_gpu_count_and_verdicts(name: str) -> None:
    folder = shared_fixtures("topology")
    assert name in EXPECTED, f"{name}: add its expected GPU count and verdicts to EXPECTED"
    gpus, p2p, nvlink, why = EXPECTED[name]
    label = json.loads((folder / f"{name}.json").read_text())
    facts = load_input(folder / f"{name}.txt")
    assert label["kind"] in facts["source"], facts["source"]
    assert len(facts["gpus"]) == gpus, why
    assert facts["p2p"] == p2p, why
    assert facts["nvlink"] is nvlink, why
    # Wherever the input shows a verdict, it is the label's; "unknown"/None only where it cannot.
    if p2p != "unknown" and label["p2p_usable"] is not None:
        assert p2p in LABEL_P2P[label["p2p_usable"]]
    if nvlink is not None and label["nvlink"] is not None:
        assert nvlink is label["nvlink"]


def test_every_expectation_has_a_fixture() -> None:
    folder = shared_fixtures("topology")
    assert sorted(EXPECTED) == sorted(p.stem for p in folder.glob("*.txt"))


def test_matrix_without_nvlink_never_guesses_p2p() -> None:
    """topo -m fixtures without NV# say 'unknown' and ask for `topo -p2p r`, whatever the label."""
    folder = shared_fixtures("topology")
    for path in sorted(folder.glob("*.txt")):
        label = json.loads(path.with_suffix(".json").read_text())
        if label["kind"] != "topo-m":
            continue
        facts = load_input(path)
        if facts["nvlink"] is False:
            assert facts["p2p"] == "unknown", path.name
            assert any("nvidia-smi topo -p2p r" in a["text"] for a in facts["advice"]), path.name


def test_truncated_rows_still_give_every_gpu_link() -> None:
    facts = load_input(shared_fixtures("topology") / "15-h100x8-nv18-9nics-vm-partial.txt")
    assert len(facts["pairs"]) == 28 and {p["link"] for p in facts["pairs"]} == {"NV18"}
    assert {g["id"]: g["nearest_nics"] for g in facts["gpus"]}["GPU0"] == ["NIC8"]
    assert any("NIC6" in note for note in facts["notes"])


def test_mangled_header_and_raw_nic_names() -> None:
    facts = load_input(shared_fixtures("topology") / "07-alcf-polaris-a100x4-nv4-amd-4numa.txt")
    assert [n["name"] for n in facts["nics"]] == ["mlx5_0", "mlx5_1"]
    gpu = {g["id"]: g for g in facts["gpus"]}
    assert (gpu["GPU0"]["numa"], gpu["GPU0"]["cpus"]) == (3, "24-31,56-63")
    assert gpu["GPU3"]["nearest_nics"] == ["mlx5_0"] and gpu["GPU3"]["nic_link"] == "PHB"
    assert gpu["GPU0"]["nic_link"] == "SYS"  # and so it gets the GPUDirect RDMA warning
    assert any("GPU0" in a["text"] and "nearest NIC is SYS" in a["text"] for a in facts["advice"])
