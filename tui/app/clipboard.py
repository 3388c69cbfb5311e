"""Copying text out of the app: OSC 52, wrapped for tmux's passthrough when it needs that, and a
file beside the sessions that always holds the text (its path is shown), so a copy that the
terminal refuses is never a silent "copied"."""
from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .lang import t

TMUX_TIMEOUT_S = 2.0
FIX = "tmux set -g allow-passthrough on"


@dataclass(frozen=True)
class Route:
    """How a clipboard escape reaches the terminal: "direct" (no multiplexer, or tmux with
    set-clipboard on), "passthrough" (tmux's DCS wrapping), or "none" (tmux will drop it)."""

    mode: str
    why: str


def _tmux_option(args: list[str], run: Callable[..., subprocess.CompletedProcess[str]]) -> str | None:
    """One tmux option's value, or None when tmux does not know it (older versions)."""
    try:
        proc = run(["tmux", "show-options", *args], capture_output=True, text=True, timeout=TMUX_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip().rstrip("*") if proc.returncode == 0 else None


def route(env: Mapping[str, str] | None = None,
          run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run) -> Route:
    """Where an OSC 52 escape would go from here (asks tmux for its options, under a timeout)."""
    env = os.environ if env is None else env
    if not env.get("TMUX"):
        return Route("direct", t("OSC 52 (works where the terminal allows clipboard writes)"))
    pane = env.get("TMUX_PANE")
    clip = _tmux_option(["-gv", "set-clipboard"], run)
    if clip == "on":
        return Route("direct", t("OSC 52 through tmux (set-clipboard on)"))
    passthrough = _tmux_option(["-Apv", *(["-t", pane] if pane else []), "allow-passthrough"], run)
    if passthrough is None or passthrough in ("on", "all"):
        # tmux before 3.3 has no such option and always passed DCS sequences through
        return Route("passthrough", t("OSC 52 through tmux passthrough"))
    return Route("none", t("tmux drops clipboard escapes here (set-clipboard {clip}, allow-passthrough "
                           "{passthrough}); to copy next time: {fix}", clip=clip or "?",
                           passthrough=passthrough, fix=FIX))


def osc52(text: str, mode: str) -> str:
    """The escape that puts `text` on the clipboard, wrapped for tmux when `mode` says so."""
    seq = f"\x1b]52;c;{base64.b64encode(text.encode('utf-8')).decode('ascii')}\a"
    if mode == "passthrough":  # DCS tmux; <escaped sequence> ST: every ESC inside doubled
        return "\x1bPtmux;" + seq.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return seq


def save(directory: Path, name: str, text: str) -> Path:
    """The text in a file only its owner can read (fix lines may hold host names)."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text if text.endswith("\n") else text + "\n")
    return path
