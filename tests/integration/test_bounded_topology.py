"""`distdoctor topo` on the inputs that took quadratic time or a GB (issue 25, item 3) and the
control codes an XML NIC name carried to the terminal (item 12). Each runs the real CLI in a
subprocess: it ends, at most one line on stderr, never a traceback or a raw control code, under
300 MiB (measured: a 3000-GPU matrix, 42 MB, 3.4 s and 146 MiB; the others under a second and
45 MiB; before: 120 s and 2.6 GB)."""
from __future__ import annotations

import random
from pathlib import Path

import pytest
from boundkit import run, sane

pytestmark = pytest.mark.slow


def xml_with_nic(name: str) -> str:
    return ('<system version="1"><cpu numaid="0" affinity="ff"><pci busid="0000:01:00.0"><nic>'
            f'<net name="{name}" dev="0"/></nic></pci><pci busid="0000:02:00.0" class="0x030200">'
            '<gpu dev="0" sm="80" rank="0"/></pci><pci busid="0000:03:00.0" class="0x030200">'
            '<gpu dev="1" sm="80" rank="1"/></pci></cpu></system>\n')


def matrix(n: int) -> str:
    head = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\n"
    return head + "".join(f"GPU{i}\t" + "\t".join("X" if i == j else "NV12" for j in range(n)) + "\t0-63\t0\n"
                          for i in range(n))


CASES = {
    "xml-mark-pci": "<pci " * 20_000,                       # 100 KB: 48 s before
    "nics-found-digits": "GPU0\tX\n" + "1" * 60_000 + " NICs found\n",  # 24 s before
    "affinity-letters": "\tGPU0\tGPU1\t" + "A" * 60_000 + " Affinity\nGPU0\tX\tNV1\nGPU1\tNV1\tX\n",
    "label-digits": "\tGPU0\t" + "a" + "1" * 60_000 + "x\nGPU0\tX\n",
    "word-2mb": xml_with_nic("w" * 2_000_000),
    "tabs-2mb": xml_with_nic("a" + "\t" * 2_000_000 + "b"),
    "matrix-1000": matrix(1000),                              # 38 s and 1 GB before
}
LAZY = {"matrix-3000": lambda: matrix(3000)}                 # past 120 s and 2.6 GB before


@pytest.mark.parametrize("name", sorted(CASES) + sorted(LAZY))
def test_hostile_topology_text_is_bounded(tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.txt"
    path.write_text(CASES[name] if name in CASES else LAZY[name]())
    rc, out, err, rss = run("topo", "--input", str(path))
    sane(rc, out, err, rss, codes=(0, 2))
    if name.startswith("matrix-"):
        assert rc == 0 and "Matrix cut at 256 devices" in out


@pytest.mark.parametrize("extra", [[], ["--matrix"], ["--json"], ["--dot", "-"]])
def test_control_codes_in_a_nic_name_never_reach_the_terminal(tmp_path: Path, extra: list[str]) -> None:
    path = tmp_path / "topo.xml"
    path.write_text(xml_with_nic("mlx5_0\x1b]0;owned\x07\x1b[2J\x9b31m"))
    rc, out, err, rss = run("topo", "--input", str(path), *extra)
    sane(rc, out, err, rss, codes=(0, 1))


PIECES = ["<pci ", "busid=", "GPU", "NIC", "NICs found", " Affinity", "\t", " ", "1", "a", "X", "NV12",
          "<gpu dev=\"0\"", "0000:01:00.0", "\x1b[2J", "\n"]


@pytest.mark.parametrize("seed", range(6))
def test_seeded_long_lines(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    text = "".join(rng.choice(PIECES) * rng.choice([1, 10, 1000, 20_000]) for _ in range(60))
    path = tmp_path / "t.txt"
    path.write_text(text)
    rc, out, err, rss = run("topo", "--input", str(path))
    sane(rc, out, err, rss, codes=(0, 1, 2))
