"""A sos report still in its archive (sosreport-<host>-<date>.tar.xz, .tar.gz, .tar.bz2): only
the files the recorded-node probes read are taken out, into a temporary folder, as plain files
(no links, devices or paths outside the folder), under size limits."""
from __future__ import annotations

import atexit
import fnmatch
import posixpath
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from distdoctor.knowledge.errors import InputError
from distdoctor.knowledge.i18n import t

# what probes/hardware and probes/recorded.py read, relative to the report's top folder
WANTED = ("hostname", "sos_commands/host/hostname", "sos_commands/general/hostname", "etc/hostname",
          "sos_commands/kernel/dmesg*", "sos_commands/kernel/lsmod", "sos_commands/logs/journalctl_*",
          "sos_commands/nvidia/nvidia-smi_*", "sos_commands/pci/lspci_*", "sos_commands/infiniband/*",
          "proc/cmdline", "proc/mounts", "proc/modules", "proc/[0-9]*/limits", "proc/driver/nvidia/version",
          "etc/systemd/logind.conf", "etc/systemd/logind.conf.d/*", "etc/security/limits.conf",
          "etc/security/limits.d/*", "var/log/kern.log*", "var/log/syslog", "var/log/messages", "var/log/dmesg")
MAX_MEMBER = 64 << 20   # one file; a kernel journal larger than this is cut by the probe anyway
MAX_TOTAL = 512 << 20   # everything taken out
TOP_LEVEL = ("sos_commands", "proc", "etc", "var", "sys", "hostname")
SUFFIXES = (".tar", ".tar.xz", ".txz", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2")


class ArchiveError(InputError):
    """The archive cannot be read; the message is one line."""


def is_archive(path: Path) -> bool:
    return path.is_file() and path.name.endswith(SUFFIXES)


def _relative(name: str) -> str | None:
    """A member's path under the report's top folder, or None when it is not a safe relative path."""
    norm = posixpath.normpath(name.lstrip("./"))
    if norm.startswith(("/", "..")) or "/../" in f"/{norm}/":
        return None
    parts = norm.split("/", 1)
    if parts[0] in TOP_LEVEL:  # an archive of the tree itself, without the report's folder
        return norm
    return parts[1] if len(parts) == 2 else None  # sosreport-<host>-<date>/<path>


def _wanted(relative: str) -> bool:
    return any(fnmatch.fnmatchcase(relative, pattern) for pattern in WANTED)


def _top(path: Path) -> str:
    name = path.name
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)] or "sosreport"
    return name


def extract(path: Path, into: Path) -> Path:
    """The wanted files of the archive under into/<report name>/ (its host is read from the
    name when no hostname file is inside); returns that folder."""
    root = into / _top(path)
    root.mkdir(parents=True)
    total = 0
    try:
        with tarfile.open(path, "r:*") as archive:
            for member in archive:
                relative = _relative(member.name)
                if relative is None or not member.isfile() or not _wanted(relative):
                    continue
                if member.size > MAX_MEMBER or total + member.size > MAX_TOTAL:
                    continue  # too big to be what we read; the probe says what is missing
                source = archive.extractfile(member)
                if source is None:
                    continue
                target = root / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                with source, open(target, "wb") as out:
                    shutil.copyfileobj(source, out)
                total += member.size
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ArchiveError(t("{path}: not a readable sos archive ({why})", path=path, why=exc)) from None
    return root


@contextmanager
def extracted(path: Path) -> Iterator[Path]:
    """extract() into a temporary folder, removed afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix="distdoctor-sos-"))
    try:
        yield extract(path, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def extract_until_exit(path: Path) -> Path:
    """extract() into a temporary folder removed when this process exits (one command's run)."""
    tmp = Path(tempfile.mkdtemp(prefix="distdoctor-sos-"))
    atexit.register(shutil.rmtree, tmp, True)
    return extract(path, tmp)
