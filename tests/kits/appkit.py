"""Builds the app for tests: the real knowledge base and probes, a recorded host, a temp store."""
from __future__ import annotations

import asyncio
import functools
import ipaddress
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from runnerkit import RecordedRunner

from distdoctor.knowledge import load_knowledge
from distdoctor.probes.base import ProbeContext
from distdoctor.tui.record.session import SessionStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ROOT = FIXTURES / "probes" / "vm-docker"  # a container's /proc, /sys, /etc, recorded
VERSIONS = FIXTURES / "app" / "versions-cpu-torch.txt"
MASTER_PORT = "29911"  # nothing listens there: the master connect is refused at once, on loopback

# A torchrun job of 2 nodes x 2 ranks whose MASTER_ADDR is loopback: the hang-at-init story.
HANG_ENV = {"PATH": "/usr/bin:/bin", "TORCHELASTIC_RUN_ID": "job-17", "RANK": "0", "LOCAL_RANK": "0",
            "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": MASTER_PORT}
# A Slurm job with debugging switches left on, in a Docker container with 64 MB of /dev/shm.
ERROR_ENV = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "4242", "NCCL_P2P_DISABLE": "1",
             "NCCL_DEBUG": "INFO", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": MASTER_PORT}


def docker_shm_statvfs(path: str) -> os.statvfs_result:
    """/dev/shm as Docker gives it by default: 64 MiB, empty (statvfs of the real host is not)."""
    return os.statvfs_result((4096, 4096, 16384, 16384, 16384, 0, 0, 0, 0, 255))


def resolve_off_host(host: str) -> list[str]:
    """A resolver that does not ask this host's DNS: literals as given, names to one LAN address."""
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        return ["10.20.0.11"]


NVML = FIXTURES / "topology" / "nvml-2gpu-rtx4090-pcie-no-p2p.json"  # two GPUs, no usable P2P


def recorded_probes() -> dict[str, Any]:
    """The registry's probes, with those that read host-wide state (statvfs, DNS, sockets of
    other processes, NVML) fed from recordings instead."""
    import json

    from topology_fake_nvml import FakePynvml

    from distdoctor.probes.hardware import HARDWARE_PROBES
    from distdoctor.probes.network import probe_network
    from distdoctor.probes.registry import PROBES
    from distdoctor.probes.shm import probe_shm
    from distdoctor.probes.topology import probe_topology

    nvml = FakePynvml(json.loads(NVML.read_text(encoding="utf-8")))
    # the container recording holds no kernel log, nvidia-smi or lspci: the hardware probes
    # (tests/test_hardware_*.py) would only add "unavailable" rows to every screen
    base = {name: probe for name, probe in PROBES.items() if name not in HARDWARE_PROBES}
    return dict(base, shm=partial(probe_shm, statvfs=docker_shm_statvfs),
                network=partial(probe_network, resolver=resolve_off_host, connections=list),
                topology=partial(probe_topology, nvml=nvml))


def recorded_ctx(env: Mapping[str, str], home: Path) -> ProbeContext:
    """A host made of recordings: runner answers, a container root, the job's environment."""
    runner = RecordedRunner({(sys.executable, "-c", _snippet()): VERSIONS.read_text(encoding="utf-8")})
    return ProbeContext(runner=runner, root=ROOT, env=dict(env), python=sys.executable,
                        home=home, timeout=5.0)


def _snippet() -> str:
    from distdoctor.probes.versions import SNIPPET

    return SNIPPET


def build(tmp: Path, env: Mapping[str, str], *, session_id: str = "t1", learn: bool = False,
          resume: str | None = None, store: SessionStore | None = None) -> Any:
    """The real app with recorded probes and its own session store under `tmp`."""
    from distdoctor.tui.app.app import make_app

    home = tmp / "home"
    home.mkdir(exist_ok=True)
    store = store or SessionStore(tmp / "sessions")
    return make_app(load_knowledge(), recorded_ctx(env, home), store, session_id=session_id,
                    learn=learn, resume=resume, probes=recorded_probes())


def screen_text(app: Any) -> str:
    """Everything the current screen shows, as plain text (for asserting on what users see)."""
    from rich.console import Console

    # wide, so that assertions can look for whole phrases the terminal would wrap
    console = Console(width=240, record=True, file=open(os.devnull, "w"), color_system=None)
    for widget in app.screen.query("*"):
        if not widget.display or not widget.is_mounted:
            continue
        renderable = _plain(widget)
        if renderable is not None:
            console.print(renderable)
    return console.export_text()


def terminal_lines(app: Any) -> list[str]:
    """The terminal as the user sees it, line by line (what is scrolled away or covered by
    another widget is not there), rendered the way App.export_screenshot does."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system=None, record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text().splitlines()


def _plain(widget: Any) -> Any:
    from rich.text import Text
    from textual.widgets import DataTable, Log, OptionList, Static, Tree

    if isinstance(widget, DataTable):
        rows = [" | ".join(str(c) for c in widget.get_row_at(i)) for i in range(widget.row_count)]
        return Text("\n".join(rows)) if rows else None  # log lines hold [brackets], not markup
    if isinstance(widget, OptionList):
        return "\n".join(str(widget.get_option_at_index(i).prompt) for i in range(widget.option_count))
    if isinstance(widget, Tree):
        lines, todo = [], [widget.root]
        while todo:
            node = todo.pop(0)
            lines.append(str(node.label))
            todo[:0] = list(node.children) if node.is_expanded else []
        return "\n".join(lines)
    if isinstance(widget, Log):
        return "\n".join(widget.lines)
    if isinstance(widget, Static):
        content = widget.content
        if isinstance(content, str):
            return Text.from_markup(content)
        return content if hasattr(content, "__rich_console__") else str(content)
    return None


def run_async(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run an async test function in its own event loop (no asyncio plugin in this project);
    pytest still sees the original signature, so fixtures work."""
    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return wrapper


async def settle(pilot: Any) -> None:
    """Let the app's workers finish and their messages land (no sleeps)."""
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def classified(pilot: Any) -> None:
    """Answer Classify with the first symptom and its first sub-symptom (hang at init)."""
    await pilot.press("enter")
    await pilot.pause()
    await pilot.press("enter")
    await pilot.pause()
