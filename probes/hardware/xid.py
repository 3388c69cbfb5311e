"""NVIDIA's Xid catalogue, reduced to what a node check needs: is this Xid a hardware fault?

From NVIDIA's "Xid Errors" catalogue (docs.nvidia.com/deploy/xid-errors, the "Xid Error
Listing" and its per-Xid "immediate action"): an Xid whose cause is the GPU, its memory, its
link or its firmware is "hardware" (reset, drain or replace the GPU); one whose cause is the
program that ran (an illegal address, a bad kernel, a killed context) is "application" and
never a hardware fault; anything else (driver events, display, unknown numbers) is "other".
"""
from __future__ import annotations

HARDWARE = "hardware"
APPLICATION = "application"
OTHER = "other"

# code -> (category, short name)
XIDS: dict[int, tuple[str, str]] = {
    8: (OTHER, "GPU stopped processing"),
    13: (APPLICATION, "graphics engine exception"),
    31: (APPLICATION, "GPU memory page fault"),
    32: (OTHER, "invalid or corrupted push buffer stream"),
    38: (OTHER, "driver firmware error"),
    43: (APPLICATION, "GPU stopped processing (the program's context was killed)"),
    44: (OTHER, "graphics engine fault during context switch"),
    45: (APPLICATION, "preemptive cleanup after an earlier error"),
    48: (HARDWARE, "double-bit ECC error"),
    54: (HARDWARE, "auxiliary power not connected"),
    56: (HARDWARE, "display engine error"),
    57: (HARDWARE, "error programming the video memory interface"),
    58: (HARDWARE, "unstable video memory interface"),
    61: (HARDWARE, "internal micro-controller breakpoint"),
    62: (HARDWARE, "internal micro-controller halt"),
    63: (HARDWARE, "ECC page retirement or row remapping event"),
    64: (HARDWARE, "ECC page retirement or row remapping failure"),
    68: (APPLICATION, "video processor exception"),
    69: (APPLICATION, "graphics engine class error"),
    74: (HARDWARE, "NVLink error"),
    79: (HARDWARE, "GPU has fallen off the bus"),
    81: (HARDWARE, "VGA subsystem error"),
    92: (HARDWARE, "high single-bit ECC error rate"),
    94: (HARDWARE, "contained ECC error"),
    95: (HARDWARE, "uncontained ECC error"),
    109: (OTHER, "context switch timeout"),
    119: (HARDWARE, "GSP RPC timeout"),
    120: (HARDWARE, "GSP error"),
    121: (HARDWARE, "C2C link error"),
    123: (HARDWARE, "SPI PMU RPC failure"),
    140: (HARDWARE, "unrecovered ECC error"),
    143: (HARDWARE, "GPU initialization failure"),
    144: (HARDWARE, "NVLink error"),
    145: (HARDWARE, "NVLink error"),
    146: (HARDWARE, "NVLink error"),
    147: (HARDWARE, "NVLink error"),
    148: (HARDWARE, "NVLink error"),
    149: (HARDWARE, "NVLink error"),
    150: (HARDWARE, "NVLink error"),
}


def classify(code: int) -> tuple[str, str]:
    """(category, short name) of an Xid; unknown numbers are "other", never hardware."""
    return XIDS.get(code, (OTHER, "not in the catalogue"))
