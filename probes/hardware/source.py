"""Where a hardware probe's text comes from: a recorded node's files (a root-like tree or an
extracted sos report) first, else the live command, run through the injected runner."""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..base import ProbeContext
from ..runner import CommandResult

MAX_BYTES = 32 << 20  # a kernel log or `lspci -vvv` is far smaller; the tail is what matters


@dataclass(frozen=True)
class Text:
    """A text and where it came from ("sos_commands/kernel/dmesg", "nvidia-smi -q")."""

    text: str
    origin: str


def read_file(ctx: ProbeContext, relative: str, limit: int = MAX_BYTES) -> Text | None:
    """A file under ctx.root (a path written without its leading /), its last `limit` bytes."""
    path = ctx.root / relative.lstrip("/")
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size  # 0 for /proc and /sys files, whatever they hold
            if size > limit:
                fh.seek(size - limit)
            data = fh.read(limit)
    except OSError:
        return None
    return Text(data.decode("utf-8", "replace"), relative.lstrip("/"))


def glob_files(ctx: ProbeContext, pattern: str) -> list[str]:
    """Paths (relative to root) matching a glob under root, in name order."""
    try:
        return sorted(str(p.relative_to(ctx.root)) for p in ctx.root.glob(pattern) if p.is_file())
    except OSError:
        return []


def run(ctx: ProbeContext, argv: Sequence[str]) -> tuple[Text | None, str]:
    """The command's output, or None and why it gave none (not installed, failed, timed out)."""
    result: CommandResult = ctx.runner(list(argv), timeout=ctx.timeout)
    if not result.ok:
        return None, reason_of(result)
    return Text(result.stdout, " ".join(argv)), ""


def reason_of(result: CommandResult) -> str:
    """Why a command gave no usable output, in one line."""
    if result.error:
        return result.error
    first = (result.stderr or result.stdout).strip().splitlines()
    why = first[0] if first else f"exit status {result.returncode}"
    return f"{' '.join(result.argv)}: {why}"


def first_text(ctx: ProbeContext, files: Sequence[str], commands: Sequence[Sequence[str]]
               ) -> tuple[Text | None, list[str]]:
    """The first recorded file that exists, else the first command that answers; with the
    reasons each command gave when nothing answered."""
    for relative in files:
        found = read_file(ctx, relative)
        if found is not None:
            return found, []
    reasons: list[str] = []
    for argv in commands:
        found, why = run(ctx, argv)
        if found is not None:
            return found, []
        reasons.append(why)
    return None, reasons


def is_live(ctx: ProbeContext) -> bool:
    """Whether the probe reads this machine (root /) rather than a recorded node."""
    return Path(ctx.root) == Path("/")


def bus_id(text: str) -> str:
    """A PCI address in one spelling: "00000000:10:1C.0", "PCI:0000:10:1c" -> "0000:10:1c.0"."""
    value = text.strip().lower()
    if value.startswith("pci:"):
        value = value[4:]
    parts = value.split(":")
    if len(parts) == 2:
        parts = ["0000", *parts]
    if len(parts) != 3:
        return value
    domain, bus, dev = parts
    if "." not in dev:
        dev += ".0"
    return f"{domain[-4:].rjust(4, '0')}:{bus.rjust(2, '0')}:{dev}"


def is_recorded(ctx: ProbeContext) -> bool:
    """Whether the probe reads a recorded node (`--root`): nothing can be run for it."""
    from ..offline import OfflineRunner

    return isinstance(ctx.runner, OfflineRunner)
