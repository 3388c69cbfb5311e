"""The pictures: text drawing within its width, matrix, Graphviz and a self-contained SVG."""
from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from fixturekit import SHARED_FIXTURES

from distdoctor.probes.topology import draw_matrix, draw_text, load_input, to_dot, to_svg

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "topology"
INPUTS = sorted(HERE.glob("*.txt")) + sorted((SHARED_FIXTURES / "topology").glob("*.txt"))
SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.stem)
def test_every_picture_of_every_input(path: Path) -> None:
    facts = load_input(path)
    for width in (80, 100):
        text = draw_text(facts, width)
        assert max(len(line) for line in text.splitlines()) <= width
    assert max(len(line) for line in draw_matrix(facts).splitlines()) <= 80
    root = ET.fromstring(to_svg(facts))  # well-formed XML
    assert root.tag == f"{SVG}svg"
    labels = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert all(g["id"][:8] in labels for g in facts["gpus"])
    dot = to_dot(facts)
    assert dot.count("{") == dot.count("}") and all(f'"{g["id"]}"' in dot for g in facts["gpus"])


def test_text_groups_by_numa_and_labels_links() -> None:
    text = draw_text(load_input(HERE / "topo-m-and-p2p-r-4gpu-2socket.txt"))
    lines = text.splitlines()
    assert lines[:2] == ["GPU topology from topo-m+topo-p2p: 4 GPUs",
                         "P2P: partial (without: GPU0-GPU2, GPU0-GPU3, GPU1-GPU2...)   NVLink: no"]
    assert lines.index("NUMA 0 · CPUs 0-11") < lines.index("  GPU0") < lines.index("NUMA 1 · CPUs 12-23")
    assert "  PIX        ok         GPU0-GPU1 GPU2-GPU3" in lines
    assert "  SYS        no (CNS)   GPU0-GPU2 GPU0-GPU3 GPU1-GPU2 GPU1-GPU3" in lines


def test_matrix_marks_p2p() -> None:
    text = draw_matrix(load_input(HERE / "topo-m-and-p2p-r-4gpu-2socket.txt"))
    assert "GPU0  X     PIX   SYS!  SYS!" in text.splitlines()


def test_svg_is_self_contained() -> None:
    svg = to_svg(load_input(HERE / "topo-m-8gpu-4nic-hybrid-cube-mesh.txt"))
    assert "<script" not in svg and "href" not in svg and "url(" not in svg
    assert svg.startswith("<svg ") and 'aria-label="GPU topology: P2P all"' in svg


def test_cli_and_probe_import_neither_textual_nor_torch() -> None:
    code = ("import sys, distdoctor.tui.commands.topo, distdoctor.probes.topology;"
            "print(sorted(m for m in ('textual', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr
