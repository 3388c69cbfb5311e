"""Our own samples in the documented formats (tests/fixtures/topology): each format's details."""
from __future__ import annotations

from pathlib import Path

import pytest

from distdoctor.probes.topology import TopologyInputError, analyse, load_input

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "topology"

# name: (source, GPUs, NICs, p2p, nvlink)
SAMPLES = {
    "topo-m-8gpu-4nic-hybrid-cube-mesh": ("topo-m", 8, 4, "all", True),
    "topo-m-old-driver-soc-mlx4": ("topo-m", 4, 1, "unknown", False),
    "topo-m-spaces-header-mangled": ("topo-m", 4, 2, "all", True),
    "p2p-r-4gpu-cns-across-sockets": ("topo-p2p", 4, 0, "partial", None),
    "topo-m-and-p2p-r-4gpu-2socket": ("topo-m+topo-p2p", 4, 0, "partial", False),
    "topo-m-and-p2p-w-2gpu-gns": ("topo-m+topo-p2p", 2, 0, "none", False),
    "nccl-xml-2gpu-plx-no-nvlink": ("nccl-xml", 2, 1, "unknown", False),
    "nccl-xml-h100-nvswitch-cut-mid-tag": ("nccl-xml", 3, 2, "all", True),
    "nccl-info-p2p-disabled-4gpu": ("nccl-info", 4, 1, "none", None),
    "nccl-info-8gpu-busid-brackets-nvls": ("nccl-info", 8, 4, "all", True),
    "nccl-info-topology-dump-4gpu-2socket": ("nccl-info", 4, 1, "unknown", False),
}


def pairs(facts: dict) -> dict[str, tuple[str | None, str]]:
    return {f"{p['a']}-{p['b']}": (p["link"], p["p2p"]) for p in facts["pairs"]}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_sample_verdicts(name: str) -> None:
    source, gpus, nics, p2p, nvlink = SAMPLES[name]
    facts = load_input(HERE / f"{name}.txt")
    assert (facts["source"], len(facts["gpus"]), len(facts["nics"])) == (source, gpus, nics)
    assert (facts["p2p"], facts["nvlink"]) == (p2p, nvlink)


def test_every_sample_is_listed() -> None:
    assert sorted(SAMPLES) == sorted(p.stem for p in HERE.glob("*.txt"))


def test_hybrid_cube_mesh_reaches_every_pair_through_nvlink() -> None:
    facts = load_input(HERE / "topo-m-8gpu-4nic-hybrid-cube-mesh.txt")
    got = pairs(facts)
    assert got["GPU0-GPU3"] == ("NV2", "OK") and got["GPU0-GPU1"] == ("NV1", "OK")
    # GPU0-GPU5 has no NVLink of its own: NCCL goes through GPU1 or GPU4 (path NVB).
    assert got["GPU0-GPU5"] == ("SYS", "OK")
    assert "NVB" in next(p["evidence"] for p in facts["pairs"] if p["b"] == "GPU5" and p["a"] == "GPU0")
    assert [n["name"] for n in facts["nics"]] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert facts["advice"] == []


def test_old_driver_soc_is_sys_and_raw_nic_column() -> None:
    facts = load_input(HERE / "topo-m-old-driver-soc-mlx4.txt")
    assert pairs(facts)["GPU0-GPU2"] == ("SYS", "unknown")
    gpu = {g["id"]: g for g in facts["gpus"]}
    assert (gpu["GPU2"]["nearest_nics"], gpu["GPU2"]["nic_link"]) == (["mlx4_0"], "SYS")
    assert gpu["GPU0"]["cpus"] == "0-7,16-23" and gpu["GPU0"]["numa"] is None
    texts = " ".join(a["text"] for a in facts["advice"])
    assert "nvidia-smi topo -p2p r" in texts and "GPU2, GPU3: the nearest NIC is SYS" in texts
    assert any(a["env"] == {"CUDA_VISIBLE_DEVICES": "0,1"} for a in facts["advice"])  # one socket


def test_spaces_for_tabs_and_nic_count_line() -> None:
    facts = load_input(HERE / "topo-m-spaces-header-mangled.txt")
    assert facts["nics_total"] == 3
    assert [(g["numa"], g["cpus"]) for g in facts["gpus"]] == [(0, "0-31"), (0, "0-31"), (1, "32-63"),
                                                               (1, "32-63")]


def test_p2p_partial_gives_groups_and_level() -> None:
    facts = load_input(HERE / "topo-m-and-p2p-r-4gpu-2socket.txt")
    assert facts["pairs_without_p2p"] == ["GPU0-GPU2", "GPU0-GPU3", "GPU1-GPU2", "GPU1-GPU3"]
    envs = [a["env"] for a in facts["advice"]]
    assert {"CUDA_VISIBLE_DEVICES": "0,1"} in envs and {"NCCL_P2P_LEVEL": "PIX"} in envs
    assert any("CUDA_VISIBLE_DEVICES=0,1 torchrun" in a["text"] for a in facts["advice"])
    # The p2p matrix alone has no link codes: groups, and P2P off for all-GPU jobs.
    alone = load_input(HERE / "p2p-r-4gpu-cns-across-sockets.txt")
    assert [a["env"] for a in alone["advice"]] == [{"CUDA_VISIBLE_DEVICES": "0,1"}, {"NCCL_P2P_DISABLE": "1"}]


def test_no_p2p_anywhere_makes_p2p_disable_the_default() -> None:
    facts = load_input(HERE / "topo-m-and-p2p-w-2gpu-gns.txt")
    assert pairs(facts) == {"GPU0-GPU1": ("PHB", "GNS")}
    first = facts["advice"][0]
    assert first["env"] == {"NCCL_P2P_DISABLE": "1"}
    for words in ("export NCCL_P2P_DISABLE=1", "PHB", "GPU not supported"):
        assert words in first["text"]


def test_a_gpu_row_lost_from_the_matrix_makes_p2p_unknown_not_all() -> None:
    # only GPU0-GPU1 survives (NV4: P2P works); GPU2's pairs are not shown at all
    facts = analyse("\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV4\nGPU1\t X\nGPU2\n", "ragged.txt")
    assert len(facts["gpus"]) == 3 and pairs(facts) == {"GPU0-GPU1": ("NV4", "OK")}
    assert facts["p2p"] == "unknown"
    whole = analyse("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\t X \n", "whole.txt")
    assert whole["p2p"] == "all"


def test_nccl_xml_tree_codes_and_cut_off_file() -> None:
    plx = load_input(HERE / "nccl-xml-2gpu-plx-no-nvlink.txt")
    assert pairs(plx) == {"GPU0-GPU1": ("PIX", "unknown")}  # the ASPEED VGA (0x1a03) is not a GPU
    cut = load_input(HERE / "nccl-xml-h100-nvswitch-cut-mid-tag.txt")
    assert pairs(cut)["GPU0-GPU1"] == ("NV18", "OK")
    assert {g["id"]: g["nearest_nics"] for g in cut["gpus"]}["GPU1"] == ["mlx5_1"]
    assert any("cut short" in n for n in cut["notes"])


def test_nccl_log_lines() -> None:
    off = load_input(HERE / "nccl-info-p2p-disabled-4gpu.txt")
    assert len(off["pairs"]) == 6 and {p["p2p"] for p in off["pairs"]} == {"disabled"}
    assert [g["bus_id"] for g in off["gpus"]] == ["0000:01:00.0", "0000:24:00.0", "0000:41:00.0",
                                                  "0000:61:00.0"]
    nvls = load_input(HERE / "nccl-info-8gpu-busid-brackets-nvls.txt")
    assert [g["bus_id"] for g in nvls["gpus"]][:2] == ["0000:18:00.0", "0000:2a:00.0"]
    assert pairs(nvls)["GPU0-GPU1"] == (None, "used")
    assert "NVLS" in nvls["nvlink_evidence"]
    assert any("not proof" in n for n in nvls["notes"])
    dump = load_input(HERE / "nccl-info-topology-dump-4gpu-2socket.txt")
    assert pairs(dump)["GPU0-GPU1"] == ("PIX", "unknown") and pairs(dump)["GPU0-GPU2"][0] == "SYS"
    assert [g["numa"] for g in dump["gpus"]] == [0, 0, 1, 1]


@pytest.mark.parametrize("text, problem", [
    ("", "empty"),
    ("   \n\n", "empty"),
    ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n", "truncated"),
    ("def main():\n    return 0\n", "no GPU topology"),
    ('<system version="1">\n  <cpu numaid="0" affinity="ff">\n', "XML"),
])
def test_unusable_text_is_one_line_error(text: str, problem: str) -> None:
    with pytest.raises(TopologyInputError) as err:
        analyse(text, "x.txt")
    assert problem in str(err.value) and "\n" not in str(err.value)
