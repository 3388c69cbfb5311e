"""analyse(paths) / analyse_text(text): stream every input once and rank the causes."""
from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable

from ..i18n import t as tr
from ..model import KnowledgeBase
from . import culprit, extract as x, parallel, sources as src_mod, timeline, tocollect
from .collect import Collector
from .compiled import compile_kb, kb_key
from .prefilter import sample_freq
from .report import Evidence, LogReport
from .scan import CHANNEL_BUDGET, candidates, lines_at
from .score import refine, score, stage
from .sources import Skipped, Source
from .tables import facts, first_failure, ranks_table
from .view import build

ERROR_JSON_CAP = 16 << 20  # torchelastic error files are small; a bigger .json is read as text


def analyse(paths: Iterable[str], kb: KnowledgeBase, symptom: str | None = None) -> LogReport:
    """Read files, directories (recursively), globs, .gz/.bz2/.xz and `-` (stdin); rank causes.

    Unreadable, binary, non-UTF-8, empty and one-huge-line inputs are skipped and listed; the
    caller decides what to do when nothing was readable (report.files_read == 0).
    """
    sources, skipped = src_mod.expand(list(paths))
    return _run(sources, skipped, kb, symptom)


def analyse_text(text: str, kb: KnowledgeBase, name: str = "<text>",
                 symptom: str | None = None) -> LogReport:
    """The same analysis over a string (a pasted excerpt)."""
    return _run([src_mod.open_text(text, name)], [], kb, symptom)


def _run(sources: list[Source], skipped: list[Skipped], kb: KnowledgeBase,
         symptom: str | None) -> LogReport:
    freq = _sample(sources)
    comp = compile_kb(kb, freq)
    col = Collector(comp)
    files_read = bytes_read = 0
    notes: list[str] = []
    workers = parallel.workers_for(sources)
    tasks = parallel.plain_ranges(sources) if workers > 1 else []
    results = parallel.scan_all(kb_key(kb, freq), sources, tasks, workers) if tasks else iter(())
    pending = None
    in_parallel = {t[0] for t in tasks}
    for idx, src in enumerate(sources):
        if idx in in_parallel:
            ranges = []
            while True:
                if pending is None:
                    pending = next(results, None)
                if pending is None or pending[0] != idx:
                    break
                ranges.append(pending[2])
                pending = None
            why = _feed_ranges(src, ranges, col)
            if why:
                skipped.append(Skipped(src.name, why))
                continue
            files_read += 1
            bytes_read += src.bytes_read
            if src.note:
                notes.append(f"{src.name}: {src.note}")
            continue
        try:
            ok = _read(src, col, comp)
        except src_mod.READ_ERRORS as exc:
            skipped.append(Skipped(src.name, tr("read failed: {why}", why=getattr(exc, "strerror", None) or exc)))
            continue
        if not ok:
            skipped.append(Skipped(src.name, src.rejected or tr("not a text log")))
            continue
        files_read += 1
        bytes_read += src.bytes_read
        if src.note:
            notes.append(f"{src.name}: {src.note}")
    sigs = {s.id: s for s in comp.sigs + comp.tail_sigs}
    view = build(col, sigs)
    lines = timeline.build(view)
    who = culprit.culprit(view, lines)
    timeline.own_copies(view, lines)
    # the culprit rule's id travels beside the dict (LogReport.culprit_rule), not inside it
    culprit_rule = str(who.pop("rule", "")) if who else ""
    first = first_failure(view)
    own = lines.get(who["ranks"][0]) if who else None  # absent when named from the others' lines alone
    if who and who["role"] == "crashed" and own is not None and own.end.hit is not None:
        # the culprit's own failure line, not the launcher's summary or a waiter's timeout
        h = own.end.hit
        first = Evidence(h.file, h.line, h.text, who["ranks"][0], h.sig)
    return LogReport(
        causes=score(view, kb, symptom, lines, who, culprit_rule),
        timeline={r: rl.to_dict() for r, rl in lines.items()},
        culprit=who,
        summary=culprit.summary(view, lines, who),
        symptom=refine(kb, view, symptom),
        culprit_rule=culprit_rule,
        collect=tocollect.store_collect(view, who) + tocollect.output_missing(lines),
        stage=stage(view),
        first_failure=first,
        ranks=ranks_table(view),
        facts=facts(view),
        files_read=files_read,
        bytes_read=bytes_read,
        skipped=[s.to_dict() for s in skipped],
        notes=notes,
    )


SAMPLE_MIN = 8 << 20  # below this much plain input, the built-in frequency estimate will do
SAMPLE_EACH = 256 << 10


def _sample(sources: list[Source]) -> tuple | None:
    """Character frequencies from the middle of up to four big plain files (see prefilter.plan)."""
    plain = [s for s in sources if s.kind == "plain" and s.path]
    if sum(s.size for s in plain) < SAMPLE_MIN:
        return None
    step = max(1, len(plain) // 4)
    parts = []
    for s in plain[::step][:4]:
        try:
            with open(s.path, "rb") as fh:  # type: ignore[arg-type]
                fh.seek(max(0, s.size // 2 - SAMPLE_EACH // 2))
                parts.append(fh.read(SAMPLE_EACH))
        except OSError:
            continue
    return sample_freq(b"".join(parts)) if parts else None


def _read(src: Source, col: Collector, comp) -> bool:
    if src.path and src.path.endswith(".json") and 0 < src.size <= ERROR_JSON_CAP and src.kind == "plain":
        text = _error_json(src.path)
        if text is not None:
            src = src_mod.Source(name=src.name, path=None, kind="stdin", raw=io.BytesIO(text.encode()))
            src.path = None
    f = col.begin(src.name, _local_map(src))
    budget = CHANNEL_BUDGET
    got_any = False
    try:
        for blk in src_mod.blocks(src):
            got_any = True
            starts, via, taken = candidates(comp, blk, budget)
            budget -= taken
            f.channels += taken
            for start, line_no, text in lines_at(blk, starts):
                if start in via:
                    col.channel(text)
                else:
                    col.feed(line_no, text)
    except src_mod.READ_ERRORS as exc:
        if not got_any:
            col.files.pop()
            raise
        # a truncated or damaged compressed file: what came before the damage still counts
        src.note = f"stopped reading: {exc}"
    if src.rejected or not got_any:
        col.files.pop()
        return False
    col.end(src.tail, src.lines)
    src.tail = b""  # read: 32 KiB a file kept to the end was 128 MiB over 4096 rank files
    return True


def _local_map(src: Source) -> dict[str, str]:
    """torchrun's local -> global ranks from the summary at the end of a node's console (a file
    read from its end, or pasted text), before its lines are read; {} for a compressed file, and
    for a file of one rank (`rank3.log`, torchrun's `attempt_0/3/stderr.log`): no console there,
    and no second read of each of thousands of rank files."""
    if x.file_rank(src.name) is not None:
        return {}
    try:
        if src.kind == "stdin" and isinstance(src.raw, io.BytesIO):
            return x.local_ranks(src.raw.getbuffer()[-src_mod.TAIL:].tobytes())
        if src.kind == "plain" and src.path:
            with open(src.path, "rb") as fh:
                fh.seek(max(0, src.size - src_mod.TAIL))
                return x.local_ranks(fh.read(src_mod.TAIL))
    except OSError:
        pass  # the read itself reports the file
    return {}


def _feed_ranges(src: Source, ranges: list, col: Collector) -> str:
    """Feed a worker-scanned file to the collector in line order; the skip reason if it failed."""
    for r in ranges:
        if isinstance(r, BaseException):
            return tr("read failed: {why}", why=r)
    col.begin(src.name, _local_map(src))
    offset, tail = 0, b""
    for r in ranges:
        for line, text, via in r.lines:
            if via:
                col.channel(text)
            else:
                col.feed(offset + line, text)
        offset += r.nlines
        tail = (tail + r.tail)[-src_mod.TAIL:]
        src.bytes_read += r.bytes_read
        if r.note:
            src.note = r.note
    col.end(tail, offset)
    return ""


def _error_json(path: str) -> str | None:
    """A torchelastic error file (TORCHELASTIC_ERROR_FILE) as log lines, or None if it is not one.

    Shape: {"message": {"message": "RuntimeError: ...", "extraInfo": {"py_callstack": "...",
    "timestamp": "..."}}} (older releases put a plain string in "message").
    """
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(doc, dict) or "message" not in doc:
        return None
    msg = doc["message"]
    lines: list[str] = []
    if isinstance(msg, dict):
        lines.append(str(msg.get("message", "")))
        extra = msg.get("extraInfo") or {}
        if isinstance(extra, dict):
            lines.extend(str(extra.get("py_callstack", "")).splitlines())
    else:
        lines.append(str(msg))
    rank = os.path.basename(os.path.dirname(path))
    prefix = f"[rank{rank}]:" if rank.isdigit() else ""
    return "\n".join(prefix + ln for ln in lines if ln.strip()) + "\n"
