"""Reads any supported input, detecting each format by its content (never by the file name)."""
from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path

from distdoctor.knowledge import nccl_grammar as grammar
from distdoctor.knowledge.errors import InputError
from distdoctor.knowledge.i18n import t
from distdoctor.knowledge.lazyre import lazy

from .model import Topology
from .parse_matrix import find_blocks, parse_p2p, parse_topo_m
from .parse_nccl_log import parse_nccl_log
from .parse_xml import parse_xml

MAX_BYTES = 32 << 20
# bounded attribute runs: `[^>]*` rescans the rest of a line from every `<pci` (quadratic)
XML_MARK = re.compile(r"<system\b|<cpu\b[^>]{0,512}?\bnumaid=|<pci\b[^>]{0,512}?\bbusid=|<gpu\b[^>]{0,512}?\bdev=")
MAX_LINE = 8192  # no topology line comes near it; a longer one is cut before any pattern sees it
# NCCL's own line header (host:pid:tid [dev] NCCL INFO), its version banner, nccl-tests' rank list:
# knowledge/nccl_grammar.py's pieces, which stay linear on a long line without a newline.
NCCL_MARK = lazy("|".join((grammar.anonymous(grammar.HEADER), "^" + grammar.BANNER + r"\d",
                          grammar.anonymous(grammar.TESTS_RANK_HEAD))), re.M)
WHAT = ("expected `nvidia-smi topo -m` or `topo -p2p` output, NCCL topology XML or NCCL INFO lines")


class TopologyInputError(InputError, ValueError):
    """An input that cannot be read as topology; the message is one line naming the problem."""


def read_bounded(path: str | Path) -> tuple[str, str]:
    """(text, note): the text of a file (or '-' for stdin) up to MAX_BYTES, cut at a line end,
    and a note saying how much was left unread ('' when it was all read). Binary, unreadable and
    non-regular files (FIFOs, devices) and a closed stdin are TopologyInputErrors."""
    name = str(path)
    total: int | None = None
    try:
        if name == "-":
            if sys.stdin is None:  # started with stdin closed (`<&-`)
                raise TopologyInputError(t("- reads standard input, which is closed here"))
            data = sys.stdin.buffer.read(MAX_BYTES + 1)
        else:
            mode = os.stat(path).st_mode
            # a FIFO would block the read and a device (/dev/zero) never ends: regular files only
            if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
                raise TopologyInputError(t("{name}: not a regular file (FIFO, device or socket); save the output to a "
                                           "file, or pipe it to --input -", name=name))
            with open(path, "rb") as fh:
                total = os.fstat(fh.fileno()).st_size
                data = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise TopologyInputError(t("{name}: no such file", name=name)) from None
    except IsADirectoryError:
        raise TopologyInputError(t("{name}: is a directory, not a file", name=name)) from None
    except OSError as exc:
        raise TopologyInputError(t("{name}: cannot read ({why})", name=name, why=exc.strerror or exc)) from None
    if looks_binary(data[:8192]):
        raise TopologyInputError(t("{name}: binary data, not a topology file ({WHAT})", name=name, WHAT=t(WHAT)))
    note = ""
    if len(data) > MAX_BYTES:
        data = data[:MAX_BYTES]
        cut = data.rfind(b"\n")
        data = data[:cut + 1] if cut > 0 else data  # no half line at the end
        of = f" of {total >> 20} MiB" if total else " (standard input holds more)"
        note = (f"Read only the first {len(data) >> 20} MiB{of}: topology output is a few KiB. "
                f"For a big NCCL log, keep the NCCL lines first: grep -e 'NCCL INFO' -e '^ *[+]' -e "
                f"'/' LOG | grep -v opCount | distdoctor topo --input -")
    return data.decode("utf-8", "replace"), note


def looks_binary(head: bytes) -> bool:
    """NUL bytes, or more than a tenth of the characters undecodable or control characters (tabs,
    line ends and the ESC of coloured logs are text). Random bytes without a NUL are caught here
    instead of costing seconds of parsing."""
    if b"\x00" in head:
        return True
    text = head.decode("utf-8", "replace")
    odd = sum(1 for ch in text if ch == "\ufffd" or (ch < " " and ch not in "\t\n\r\f\v\x1b"))
    return odd > max(8, len(text) // 10)


def parse_text(text: str, name: str = "<text>") -> Topology:
    """Every topology section found in `text`, merged: a paste with `topo -m` and `topo -p2p r`
    together gives both the links and the P2P statuses."""
    if not text.strip():
        raise TopologyInputError(t("{name}: empty file ({WHAT})", name=name, WHAT=t(WHAT)))
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    long = sum(1 for line in lines if len(line) > MAX_LINE)
    if long and "><" in text:  # XML written on one line: one element a line, then cut
        text = text.replace("><", ">\n<")
        lines = text.split("\n")
        long = sum(1 for line in lines if len(line) > MAX_LINE)
    if long:
        lines = [line[:MAX_LINE] for line in lines]
        text = "\n".join(lines)
    parts: list[Topology] = []
    blocks = find_blocks(lines)
    matrices = [b for b in blocks if b.rows]
    topo_m = [b for b in matrices if b.kind == "topo-m"]
    if topo_m:
        first = parse_topo_m(topo_m[0], lines)
        if len(topo_m) > 1:
            first.note(t("{n} `topo -m` matrices in this input: only the first is read.", n=len(topo_m)))
        parts.append(first)
    parts += [parse_p2p(b, lines) for b in matrices if b.kind == "topo-p2p"]
    # a substring test first: the patterns try three alternatives at every position of 32 MB
    if "<" in text and XML_MARK.search(text):
        parts.append(parse_xml(text))
    if ("NCCL" in text or "Rank" in text) and NCCL_MARK.search(text):
        parts.append(parse_nccl_log(text))
    useful = [p for p in parts if p.gpus]
    if not useful:
        raise TopologyInputError(f"{name}: {why_nothing(blocks, parts, text)}")
    topo = useful[0]
    for part in useful[1:]:
        topo.merge(part)
    if long:
        topo.note(t("{n} line(s) longer than {most} characters were cut there: no topology line is that long.",
                    n=long, most=MAX_LINE))
    return topo


def why_nothing(blocks: list, parts: list[Topology], text: str) -> str:
    """The one-line reason an input gave no GPU at all."""
    headers = [b for b in blocks if b.labels and not b.rows]
    if headers:
        gpus = [label for label in headers[0].labels if label.startswith("GPU")]
        return (f"truncated `nvidia-smi topo -m` output: the header names {len(gpus)} GPU(s) "
                f"({gpus[0]}..{gpus[-1]}) but no matrix row follows")
    if XML_MARK.search(text):
        skipped = [n for p in parts for n in p.notes if n.startswith(("Skipped", "Read only"))]
        if skipped:
            return f"NCCL topology XML with no usable GPU: {skipped[0].rstrip('.')}"
        return "NCCL topology XML that describes no GPU (cut short before the first <pci>/<gpu>?)"
    if any(p.sources == ["nccl-info"] for p in parts):
        return ("NCCL lines that name no GPU: rerun with NCCL_DEBUG=INFO and keep the "
                "'Init START'/'Channel ... via' lines")
    return f"no GPU topology found ({WHAT})"


def load_topology(path: str | Path) -> Topology:
    text, note = read_bounded(path)
    try:
        topo = parse_text(text, str(path))
    except TopologyInputError as exc:
        if note:  # nothing in the part read: say that the rest was not read
            raise TopologyInputError(f"{exc} ({note.split(':')[0]})") from None
        raise
    if note:
        topo.note(note)
    return topo
