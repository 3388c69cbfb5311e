"""A recorded node (`check --root DIR`, `collect --root DIR`): a root-like tree (proc/, sys/,
etc/, var/log/) or an extracted sos report (sos_commands/...), read instead of this machine.
Nothing is run: every command answers "not run", so each probe reads the files or says why not."""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from distdoctor.knowledge.errors import InputError
from distdoctor.knowledge.i18n import t

from .base import Probe, ProbeContext, unavailable
from .offline import OfflineRunner
from .sosarchive import is_archive

# the probes that read a recorded node; the others ask this machine (its python, its interfaces)
RECORDED_PROBES = ("kernel", "gpu_health", "pcie", "infiniband", "limits")
# where a sos report or a root tree names its host, first found wins
HOST_FILES = ("hostname", "sos_commands/host/hostname", "sos_commands/general/hostname",
              "etc/hostname", "proc/sys/kernel/hostname")
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,253}$")


class RecordedNodeError(InputError):
    """The folder cannot be read as a node; the message is one line."""


def recorded_root(path: str) -> Path:
    """The folder as given, checked: it exists and is a directory."""
    root = Path(path)
    if not root.exists():
        raise RecordedNodeError(t("--root {path}: no such folder", path=path))
    from .sosarchive import ArchiveError, extract_until_exit

    if is_archive(root):  # sosreport-<host>-<date>.tar.xz as it came from the node
        try:
            return extract_until_exit(root.resolve())
        except ArchiveError as exc:
            raise RecordedNodeError(str(exc)) from None
    if not root.is_dir():
        raise RecordedNodeError(t("--root {path}: not a folder (give the sos report, extracted or as its "
                                  ".tar.xz, or a root tree)",
                                  path=path))
    return root.resolve()


def recorded_context(root: Path, timeout: float = 5.0) -> ProbeContext:
    """A context that reads `root` and runs nothing."""
    return ProbeContext(runner=OfflineRunner(), root=root, env=MappingProxyType({}), pid=None,
                        timeout=timeout)


def recorded_host(root: Path) -> str:
    """The node's own name from its files; else the folder's name (sos names it
    sosreport-<host>-<date>...)."""
    for relative in HOST_FILES:
        try:
            with open(root / relative, "rb") as fh:
                name = fh.read(256).decode("utf-8", "replace").strip().split()[0:1]
        except (OSError, IndexError):
            continue
        if name and _HOST.match(name[0]):
            return name[0]
    base = os.path.basename(str(root).rstrip("/")) or "recorded-node"
    if base == "root" and root.parent.name:  # <case>/root, as the shared fixtures lay them out
        base = root.parent.name
    match = re.match(r"^sosreport-([A-Za-z0-9][A-Za-z0-9.-]*?)-(?:\d|20\d\d)", base)
    return match.group(1) if match else base


def recorded_probes(registry: Mapping[str, Probe]) -> dict[str, Probe]:
    """The registry for a recorded node: its own probes run, every other one answers
    "unavailable" (asked here, they would describe this machine, not the recorded one)."""
    def stub(name: str) -> Probe:
        return lambda ctx: unavailable(name, "not read from a recorded node (--root)")

    return {name: probe if name in RECORDED_PROBES else stub(name) for name, probe in registry.items()}


# what a recorded node's folder holds at its top (an extracted sos report or a root tree)
NODE_MARKERS = ("sos_commands", "proc", "sys", "etc", "var")


def is_node_tree(path: Path) -> bool:
    return path.is_dir() and any((path / m).is_dir() for m in NODE_MARKERS)


def node_trees(paths: list[str], skipped: list[dict[str, str]]) -> list[Path]:
    """Each PATH that is a recorded node, and each node folder directly inside a PATH that is
    not one (a folder of sos reports); what is neither goes to `skipped` with why."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if is_node_tree(path) or is_archive(path):
            out.append(path)
            continue
        if not path.is_dir():
            skipped.append({"file": raw, "reason": t("not a folder")})
            continue
        if is_node_tree(path / "root"):  # <case>/root, as test fixtures lay a node out
            out.append(path / "root")
            continue
        try:
            inside = sorted(p if is_node_tree(p) or is_archive(p) else p / "root" for p in path.iterdir()
                            if is_node_tree(p) or is_archive(p) or is_node_tree(p / "root"))
        except OSError as exc:
            skipped.append({"file": raw, "reason": t("cannot list: {why}", why=exc.strerror or exc)})
            continue
        if not inside:
            skipped.append({"file": raw, "reason": t("no recorded node here (no sos_commands/, proc/, etc/ "
                                                     "or var/ in it or in its folders)")})
        out += inside
    return out


def snapshot_tree(root: Path, kb: object, registry: Mapping[str, Probe]) -> dict:
    """The snapshot `collect --root` writes, in memory; an archive is taken apart for the time
    it takes (ArchiveError when it cannot be read)."""
    from .fleet import snapshot
    from .sosarchive import extracted

    if is_archive(root):
        with extracted(root.resolve()) as tree:
            return snapshot_tree(tree, kb, registry)
    doc = snapshot(recorded_context(root.resolve()), kb, probes=recorded_probes(registry))
    doc["host"] = recorded_host(root.resolve())
    return doc
