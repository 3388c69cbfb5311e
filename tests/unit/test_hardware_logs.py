"""The log signatures of a failing GPU (issue 26): a firing example and its silent twin each.
Application Xids and CUDA errors of the program's own are never hardware evidence."""
from __future__ import annotations

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.logs import analyse_text

KB = load_knowledge(use_env=False)
NOISE = "[rank1]: 2026-12-01 10:00:00,000 - train - INFO - step:  40  loss: 2.1234\n"


def causes(text: str) -> dict[str, str]:
    return {c.id: c.basis for c in analyse_text(NOISE + text + "\n", KB, name="job.log").causes}


@pytest.mark.parametrize("line", [
    "[rank3]: RuntimeError: CUDA error: uncorrectable ECC error encountered",
    "[ 8812.334110] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    "Feb 23 16:24:18 node01 kernel: NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=python, Timeout after 6s of "
    "waiting for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).",
])
def test_hardware_lines_are_evidence(line: str) -> None:
    assert causes(line).get("gpu-hardware-fault") == "evidence"


@pytest.mark.parametrize("line", [
    "[ 8812.334110] NVRM: Xid (PCI:0000:3b:00): 13, pid=48213, name=python, Graphics SM Warp Exception on "
    "(GPC 0, TPC 1, SM 0): Out Of Range Address",
    "[ 8812.334153] NVRM: Xid (PCI:0000:3b:00): 31, pid=48213, name=python, Ch 00000008, intr 00000000. MMU Fault",
    "[ 8813.001200] NVRM: Xid (PCI:0000:3b:00): 43, pid=48213, name=python, Ch 00000008",
    "[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered",
    "[ 8812.334110] NVRM: Xid (PCI:0000:3b:00): 163, pid=1, name=python, a number past the catalogue",
])
def test_the_programs_own_faults_are_not(line: str) -> None:
    assert "gpu-hardware-fault" not in causes(line)


def test_the_signatures_xids_are_the_catalogues_hardware_ones() -> None:
    import re

    from distdoctor.probes.hardware.xid import HARDWARE, classify

    codes = re.search(r"\(([\d|]+)\)", KB.signatures["nvrm-hardware-xid"].pattern).group(1).split("|")
    assert codes and all(classify(int(c))[0] == HARDWARE for c in codes)
