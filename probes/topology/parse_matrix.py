"""Parsers for `nvidia-smi topo -m` and `nvidia-smi topo -p2p r|w|n|a|p` matrices, new and old drivers."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from distdoctor.knowledge.i18n import t

from .model import LINK_CELL_RE, P2P_CODES, Gpu, Nic, Topology, canon_link

GPU_LABEL = re.compile(r"^GPU(\d+)$")
# Row labels: GPUn, NICn on new drivers; raw RDMA device names (mlx5_0, mlx4_0, bnxt_re0, efa0) on old.
DEVICE_LABEL = re.compile(r"^(GPU\d+|NIC\d+|[A-Za-z][\w.-]*?_?\d+)$")
AFFINITY_WORDS = {"CPU", "NUMA", "Affinity", "ID"}
AFFINITY_NAMES = re.compile(r"CPU Affinity|NUMA Affinity|GPU NUMA ID|(?<![A-Za-z])[A-Za-z]{1,32} Affinity")
NIC_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
# a digit run is read from its start only, at most 9 digits: `(\d+)` from every digit of a long
# run is quadratic
NICS_FOUND = re.compile(r"(?<!\d)(\d{1,9})\s{1,8}NICs?\s+found in the topology.{0,200}?only displaying\s{1,8}(\d{1,9})",
                        re.I)
P2P_MODE = re.compile(r"topo\s+-p2p\s+([rwnap]{1,5})\b")
P2P_KIND = {"r": "read", "w": "write", "n": "nvlink", "a": "atomics", "p": "prop"}
P2P_CELLS = frozenset(P2P_CODES) | {"X"}
# Bounds no real `nvidia-smi topo` output comes near (a few dozen devices, a few hundred columns
# wide); beyond them a line or a row is not read, so a hostile paste costs time linear and small.
MAX_LINE = 1 << 16
MAX_ROWS = 256  # devices: real matrices have a few dozen (NVL72: 72 GPUs), 1000x1000 cost a GB
MAX_COLS = 256
MAX_LABEL = 64  # a device label longer than this is not one (and the label pattern would rescan it)


@dataclass
class Block:
    """One matrix found in a text: its column labels, rows and the affinity column names."""

    start: int
    labels: list[str]
    affinity: list[str]
    rows: list[tuple[str, list[str], list[str]]] = field(default_factory=list)  # label, cells, rest
    rows_end: int = -1
    cut: int = 0  # rows past MAX_ROWS, not read

    @property
    def kind(self) -> str:
        cells = {c for _, row, _ in self.rows for c in row} - {"X"}
        if cells and cells <= set(P2P_CODES):
            return "topo-p2p"
        return "topo-m"


def is_label(token: str) -> bool:
    return len(token) <= MAX_LABEL and DEVICE_LABEL.match(token) is not None


def is_cell(token: str) -> bool:
    return bool(LINK_CELL_RE.match(token)) or token in P2P_CELLS


def header_labels(tokens: list[str]) -> list[str] | None:
    """Device column labels of a header line (tokens from the first GPU0 on), or None."""
    try:
        first = next(i for i, tok in enumerate(tokens) if GPU_LABEL.match(tok))
    except StopIteration:
        return None
    labels: list[str] = []
    for i, token in enumerate(tokens[first:], start=first):
        if token in AFFINITY_WORDS or (token == "GPU" and tokens[i + 1:i + 2] == ["NUMA"]):
            break
        if not is_label(token):
            return None
        if len(labels) < MAX_COLS:
            labels.append(token)
    return labels if labels and any(GPU_LABEL.match(label) for label in labels) else None


def split_row(tokens: list[str], width: int | None) -> tuple[list[str], list[str]]:
    """Cells are the leading matrix codes (at most `width`); the rest are affinity values."""
    cells: list[str] = []
    for token in tokens:
        if len(cells) >= min(width or MAX_COLS, MAX_COLS) or not is_cell(token):
            break
        cells.append(token)
    return cells, tokens[len(cells):]


def find_blocks(lines: list[str]) -> list[Block]:
    """Every matrix in the text, with or without a (possibly mangled) header line."""
    blocks: list[Block] = []
    current: Block | None = None
    for i, line in enumerate(lines):
        if "NCCL " in line or len(line) > MAX_LINE:  # never matrix lines; skip the tokenising
            if current is not None and current.rows:
                current = None
            continue
        tokens = line.split()
        row_like = len(tokens) >= 2 and is_label(tokens[0]) and is_cell(tokens[1])
        labels = header_labels(tokens) if "GPU" in line and not row_like else None
        if labels is not None:
            rest = " ".join(tokens[tokens.index(labels[-1]) + 1:])
            current = Block(i, labels, AFFINITY_NAMES.findall(rest))
            blocks.append(current)
            continue
        if row_like:
            if current is None or (current.rows and i > current.rows_end + 1):
                current = Block(i, [], [])  # headerless paste: columns come from the rows
                blocks.append(current)
            if len(current.rows) >= MAX_ROWS:
                current.rows_end = i
                current.cut += 1
                continue
            width = len(current.labels) or None
            cells, rest = split_row(tokens[1:], width)
            current.rows.append((tokens[0], cells, rest))
            current.rows_end = i
            continue
        if current is not None and current.rows and tokens:
            current = None  # the matrix ended (legend or prose follows)
    return [b for b in blocks if b.rows or b.labels]


def columns(block: Block) -> list[str]:
    """Column labels, repaired from the rows' diagonal X when the header is short or missing."""
    cols = list(block.labels)
    for label, cells, _ in block.rows:
        if "X" in cells:
            pos = cells.index("X")
            while len(cols) <= pos:
                cols.append("")
            if not cols[pos]:
                cols[pos] = label
    if not block.labels:  # no header at all: rows are listed in column order
        row_labels = [label for label, _, _ in block.rows]
        for pos, label in enumerate(row_labels):
            if pos < len(cols) and not cols[pos]:
                cols[pos] = label
            elif pos >= len(cols):
                cols.append(label)
    return cols


def parse_numa(value: str) -> int | None:
    m = re.match(r"^(\d+)", value)
    return int(m.group(1)) if m else None


def parse_topo_m(block: Block, lines: list[str]) -> Topology:
    """A `topo -m` block -> Topology (GPUs, NICs, links, affinity, NIC legend)."""
    topo = Topology(sources=["topo-m"], nvlink_visible=True)
    legend = {m.group(1): m.group(2) for line in lines for m in [NIC_LEGEND.match(line)] if m}
    for line in lines:
        found = NICS_FOUND.search(line) if "NIC" in line and len(line) <= MAX_LINE else None
        if found:
            topo.nics_total = int(found.group(1))
            topo.note(t("{total} NICs exist; nvidia-smi displayed only {shown}.", total=found.group(1),
                        shown=found.group(2)))
    cols = columns(block)
    for label in cols + [label for label, _, _ in block.rows]:
        if not label:
            continue
        m = GPU_LABEL.match(label)
        if m:
            topo.add_gpu(Gpu(label, index=int(m.group(1))))
        else:  # NICn on new drivers (named in the NIC Legend), the raw RDMA name on old ones
            topo.add_nic(Nic(label, name=legend.get(label, label), kind="rdma"))
    for label, cells, rest in block.rows:
        for pos, cell in enumerate(cells):
            if pos < len(cols) and cols[pos] and cols[pos] != label and cell != "X":
                a, b = topo.pair(label, cols[pos])
                topo.links.setdefault((a, b), canon_link(cell))
        if label in topo.gpus and rest:
            apply_affinity(topo.gpus[label], block.affinity, rest)
    if block.cut or len(cols) >= MAX_COLS:
        topo.note(t("Matrix cut at {most} devices ({rows} more rows not read): real ones have a few dozen.",
                    most=MAX_COLS, rows=block.cut))
    if any(cell == "SOC" for _, cells, _ in block.rows for cell in cells):
        topo.note(t("Old driver layout: SOC is read as SYS (across the CPU interconnect)."))
    short = [label for label, cells, _ in block.rows if len(cells) < len(cols)]
    if short:
        topo.note(t("Matrix rows cut short ({rows}{more}): read what is there.", rows=", ".join(short[:4]),
                    more="..." if len(short) > 4 else ""))
    row_labels = {label for label, _, _ in block.rows}  # once, not per column: 10k rows happen
    missing = [c for c in cols if c and c not in row_labels]
    if missing and block.rows:
        topo.note(t("No rows for {gpus}{more} (truncated output); their links come from the other rows.",
                    gpus=", ".join(missing[:6]), more="..." if len(missing) > 6 else ""))
    return topo


def apply_affinity(gpu: Gpu, names: list[str], values: list[str]) -> None:
    """Map affinity values to their column names; pasted copies drop empty cells."""
    values = [v for v in values if v]
    if not names:
        names = ["CPU Affinity", "NUMA Affinity"]
    for name, value in zip(names, values):
        if name.startswith("CPU") and re.match(r"^[\d,\-]+$", value):
            gpu.cpus = value
        elif name.startswith("NUMA"):
            gpu.numa = parse_numa(value)


def parse_p2p(block: Block, lines: list[str]) -> Topology:
    """A `topo -p2p` block -> per-pair statuses. The mode letter comes from the command line
    above the matrix when it was pasted; otherwise the statuses count as read/write."""
    topo = Topology(sources=["topo-p2p"])
    kinds = ["p2p"]
    for line in reversed(lines[max(0, block.start - 6):block.start + 1]):
        m = P2P_MODE.search(line)
        if m:
            kinds = [P2P_KIND[c] for c in dict.fromkeys(m.group(1))]
            break
    cols = columns(block)
    for label in cols + [label for label, _, _ in block.rows]:
        if label and GPU_LABEL.match(label):
            topo.add_gpu(Gpu(label, index=int(label[3:])))
    for label, cells, _ in block.rows:
        for pos, cell in enumerate(cells):
            if pos >= len(cols) or not cols[pos] or cols[pos] == label or cell == "X":
                continue
            pair = topo.pair(label, cols[pos])
            for kind in kinds:
                old = topo.p2p.get(pair, {}).get(kind)
                if old is None or old == "OK":  # a pair is as good as its worse direction
                    topo.set_p2p(*pair, kind, cell)
    if kinds == ["nvlink"]:
        topo.nvlink_visible = True
    topo.note(t("P2P statuses from `nvidia-smi topo -p2p` ({kinds}).", kinds="/".join(kinds)))
    return topo
