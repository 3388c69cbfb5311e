"""Failure signatures: the first failure line with what changes between runs normalised away."""
from __future__ import annotations

import re
import zlib
from collections.abc import Iterable
from typing import Any

from distdoctor.knowledge.lazyre import lazy

# Applied in order: prefixes that only say who and when, then the parts of a line that differ
# from one run of the same failure to the next (addresses, paths, hosts, ports, ranks, numbers).
_PREFIXES = [
    lazy(r"^\s*\[?[IWEF]\d{4} \d\d:\d\d:\d\d(?:\.\d+)?(?:\s+\d+)?\s+\S+:\d+\]\s*"),  # glog
    lazy(r"^\s*\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s*"),
    lazy(r"^\s*[\w.-]+:\d+:\d+\s+\[\d+\]\s*"),  # NCCL's host:pid:tid [device]
    lazy(r"^\s*(?:\[(?:default|rank)\d+\]:\s*)+"),  # torchrun and torch prefixes
    lazy(r"^\s*\d+:\s+"),  # srun --label
]
def _basename(path: str) -> str:
    return re.split(r"[\\/]", path.rstrip("\\/"))[-1] or "<path>"


_SOURCE = lazy(r"\.(?:cc|cpp|cxx|c|h|hpp|cu|cuh|py|pyx|rs|go|java)$")


def _host_port(name: str) -> str:
    """host:port, except a source file and its line (pair.cc:553): the file name stays."""
    return f"{name}:<n>" if _SOURCE.search(name) else "<host>:<port>"


_RULES: list[tuple[re.Pattern[str], Any]] = [
    (lazy(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (lazy(r"\b[0-9a-fA-F]{12,}\b"), "<hex>"),  # pointers, ids, hashes without 0x
    (lazy(r"\[?\b(?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{0,4}\b\]?(?::\d+)?"), "<ip>"),  # IPv6
    (lazy(r"\[?\b\d{1,3}(?:\.\d{1,3}){3}\b\]?(?::\d+)?"), "<ip>"),
    # a path starts at a root (/x, ./x, ../x, ~/x, C:\\x) or has two slashes (torch/csrc/x.cpp);
    # NET/IB is a word. Only the file's name stays: /data/a/shard-7.bin and shard-7.bin agree
    (lazy(r"(?:(?<![\w.~])(?:\.{1,2}|~)?/|\b[A-Za-z]:[\\/])[\w.+\\/-]*|"
                r"\b[\w.+-]+/[\w.+-]+/[\w.+/-]*"), lambda m: _basename(m.group(0))),
    # FQDNs: lowercase labels, the first with a digit or a hyphen (node-17.cluster.local), so a
    # Python name (torch.distributed.DistNetworkError) is not taken for one
    (lazy(r"\b[a-z0-9]*[0-9-][a-z0-9-]*(?:\.[a-z][a-z0-9-]*){2,}(?::\d+)?\b"), "<host>"),
    (lazy(r"\b([A-Za-z][\w.-]*):\d{2,5}\b"), lambda m: _host_port(m.group(1))),
    (lazy(r"\b(?:local_)?rank\s*[:=]?\s*\d+", re.I), "rank <n>"),
    (lazy(r"\d+(?:\.\d+)*"), "<n>"),
    (lazy(r"\s+"), " "),
]
# Launcher lines that say only "a rank failed": the same for every cause. Their signature
# carries the top cause too, or every torchrun incident would share one.
_GENERIC = lazy(r"failed \(exitcode|Root Cause \(first observed failure\)|exitcode\s*:|"
                      r"ProcessExitedException|terminated with (?:exit code|signal)|"
                      r"process \d+ terminated with", re.I)
MAX_TEXT = 300


def normalise(line: str, hosts: Iterable[str] = ()) -> str:
    """The line with prefixes, addresses, paths, hosts, ports, ranks and numbers replaced."""
    text = line.strip()
    for prefix in _PREFIXES:
        text = prefix.sub("", text, count=1)
    for host in sorted({h for h in hosts if h and len(h) > 1}, key=len, reverse=True):
        text = re.sub(rf"(?<![\w.-]){re.escape(host)}(?![\w-])", "<host>", text)
    for pattern, repl in _RULES:
        text = pattern.sub(repl, text)
    return text.strip()[:MAX_TEXT]


def signature(line: str | None, top_cause: str | None = None, hosts: Iterable[str] = ()) -> tuple[str, str]:
    """(id, text): a 12-hex id of the normalised first failure line, and that text. A launcher's
    generic line ("failed (exitcode: 1) local_rank: 0") is qualified by the top cause."""
    text = normalise(line or "", hosts)
    if not text:
        text = f"{top_cause} | (no failure line)" if top_cause else ""
    elif top_cause and _GENERIC.search(line or ""):
        text = f"{top_cause} | {text}"
    if not text:
        return "", ""
    return signature_id(text), text


def signature_id(text: str) -> str:
    """12 hex digits for a normalised line: two CRC-32s (zlib is already loaded where hashlib,
    2.5 ms to import, is not; 48 bits keep 100,000 signatures apart)."""
    data = text.encode("utf-8")
    return f"{zlib.crc32(data):08x}{zlib.crc32(data, 0x9E3779B9) & 0xFFFF:04x}"
