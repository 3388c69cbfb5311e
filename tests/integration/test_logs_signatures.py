"""Every log signature matches lines written in its documented format; harmless lines never count."""
from __future__ import annotations

import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.logs import analyse_text
from distdoctor.knowledge.logs.compiled import compile_kb

SAMPLES = Path(__file__).parents[1] / "fixtures" / "logs" / "signature_lines.txt"
KB = load_knowledge(use_env=False)
# Ordinary lines of a healthy run, in NCCL's and a training loop's formats.
NOISE = [
    "node01:40211:40290 [1] NCCL INFO AllReduce: opCount 3f sendbuff 0x7f00 recvbuff 0x7f00 count 1024 "
    "datatype 7 op 0 root 0 comm 0x55 [nranks=16] stream 0x55",
    "[rank1]: 2026-12-01 10:00:00,000 - train - INFO - step:  40  loss: 2.1234  memory: 40.0GiB",
    "node01:40211:40290 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via SHM/direct/direct",
    "Epoch 0:  12%|#2        | 12/100 [00:03<00:22,  3.91it/s, loss=1.23]",
]


def parse_samples() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(section -> sample lines, section -> the '@ source' of each sample, '' where one is missing)."""
    out: dict[str, list[str]] = {}
    sources: dict[str, list[str]] = {}
    cur, source = None, ""
    for raw in SAMPLES.read_text(encoding="utf-8").splitlines():
        if raw.startswith("## "):
            cur, source = raw[3:].strip(), ""
            out[cur], sources[cur] = [], []
        elif cur is not None and raw.startswith("@ "):
            source = raw[2:].strip()
        elif cur is not None and raw.strip():
            out[cur].append(raw)
            sources[cur].append(source)
            source = ""
    return out, sources


SECTIONS, SOURCES = parse_samples()


def test_every_section_names_a_known_entry() -> None:
    """Sections for signatures that signatures.toml no longer has must go (or move to the new id)."""
    stale = sorted(sid for sid in SECTIONS if sid.removeprefix("harmless:") not in
                   (KB.harmless if sid.startswith("harmless:") else KB.signatures))
    assert not stale, (f"{SAMPLES.name} has lines for entries signatures.toml no longer defines: {stale}; "
                       "delete those sections or rename them to the entry that replaced them")


def test_every_sample_names_the_source_of_its_format() -> None:
    missing = [(sid, SECTIONS[sid][i]) for sid, srcs in SOURCES.items() for i, src in enumerate(srcs) if not src]
    assert not missing, f"sample lines without an '@ <source>' line before them: {missing}"


def test_samples_carry_no_reporter_details() -> None:
    """Neutral hosts, addresses and paths only: nothing from a report's machine."""
    neutral_hosts = {"node01", "node02", "node01x"}
    for sid, lines in SECTIONS.items():
        for line in lines:
            m = re.match(r"([\w.\-]+):\d+:\d+ \[\d+\]", line)
            assert m is None or m.group(1) in neutral_hosts, (sid, line)
            assert "/home/" not in line or "/home/user/" in line, (sid, line)


@pytest.mark.parametrize("sig_id", sorted(KB.signatures))
def test_signature_matches_its_documented_lines(sig_id: str) -> None:
    sig = KB.signatures[sig_id]
    lines = SECTIONS.get(sig_id)
    assert lines, (f"no sample lines for {sig_id} in {SAMPLES.name}: add a '## {sig_id}' section with lines "
                   "written from the format string of the program that prints them")
    rx = re.compile(sig.pattern)
    for line in lines:
        assert rx.search(line), f"{sig_id} does not match its sample: {line}"
    if ("launcher" in sig.tags or "spawn" in sig.tags) and "context" in sig.tags:
        # a launcher banner names no cause alone (every torchrun job prints it), nor does a script's
        # own spawn (a plain `python train.py` that spawns): each is found, and with the other half
        # it makes mixed-launchers evidence
        other = SECTIONS["launcher-banner" if "spawn" in sig.tags else "script-spawn"][0]
        for line in lines:
            alone = analyse_text("\n".join(NOISE[:2] + [line]) + "\n", KB, symptom="hang")
            assert all(c.id != sig.cause or c.basis == "prior" for c in alone.causes), (sig_id, line)
            both = analyse_text("\n".join(NOISE[:2] + [line, other]) + "\n", KB, symptom="hang")
            cause = next((c for c in both.causes if c.id == sig.cause), None)
            assert cause is not None and cause.basis == "evidence", (sig_id, line)
        return
    for line in lines:
        # through the whole analyser: prefilter, harmless check, scoring; in some noise
        text = "\n".join(NOISE + [line] if "tail" in sig.tags else NOISE[:2] + [line] + NOISE[2:]) + "\n"
        # context signatures are offered only when there is something to explain: a symptom
        symptom = "hang" if "context" in sig.tags else None
        report = analyse_text(text, KB, name="sample.log", symptom=symptom)
        cause = next((c for c in report.causes if c.id == sig.cause), None)
        assert cause is not None, f"{sig_id}: cause {sig.cause} not reported for: {line}"
        n = (len(NOISE) if "tail" in sig.tags else 2) + 1
        assert [e.line for e in cause.evidence] == [n], (sig_id, line)  # that line, and no noise
        assert any(r.startswith("signatures:") and f"{sig_id} x1" in r for r in cause.reasons), cause.reasons


@pytest.mark.parametrize("harmless_id", sorted(KB.harmless))
def test_harmless_lines_are_never_evidence(harmless_id: str) -> None:
    lines = SECTIONS.get(f"harmless:{harmless_id}")
    assert lines, f"no sample lines for harmless {harmless_id}"
    rx = re.compile(KB.harmless[harmless_id].pattern)
    assert all(rx.search(ln) for ln in lines)
    report = analyse_text("\n".join(NOISE + lines) + "\n", KB)
    assert report.causes == []
    assert report.first_failure is None


def test_harmless_wins_over_a_matching_signature() -> None:
    # NCCL's own retry notice contains "Connection refused", a network-unreachable signature
    line = "node01:40211:40290 [0] NCCL INFO Call to connect returned Connection refused, retrying"
    assert re.search(KB.signatures["conn-refused"].pattern, line)
    assert analyse_text(line + "\n", KB).causes == []
    with_real = line + "\nnode01:40211:40290 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect " \
                       "to 10.0.0.7<43119> failed : Connection refused\n"
    ev = [e for c in analyse_text(with_real, KB).causes for e in c.evidence]
    assert ev and all(e.line == 2 for e in ev)


def test_every_packaged_signature_is_prefiltered() -> None:
    comp = compile_kb(KB)
    assert comp.unanchored == ()
    assert comp.plan.literals or comp.plan.roots


def test_prefilter_never_drops_a_matching_line() -> None:
    """Soundness: a line any signature matches is always a candidate, whatever surrounds it."""
    rng = random.Random(5)
    samples = [ln for sid, lines in SECTIONS.items() if not sid.startswith("harmless:") for ln in lines]
    body = []
    for ln in samples:
        body.extend(rng.sample(NOISE, 2))
        cut = rng.randrange(len(ln) // 2)
        body.append(ln[:cut] + ln[cut:])  # same text; the prefilter must not care where it sits
    text = "\n".join(body) + "\n"
    report = analyse_text(text, KB)
    # count matching lines the slow way and compare with what the analyser recorded per signature
    from distdoctor.knowledge.logs.collect import Collector
    from distdoctor.knowledge.logs.engine import _read
    from distdoctor.knowledge.logs.sources import open_text

    col = Collector(compile_kb(KB))
    _read(open_text(text, "t"), col, compile_kb(KB))
    harmless = [re.compile(h.pattern) for h in KB.harmless.values()]
    for sid, sig in KB.signatures.items():
        if "tail" in sig.tags:
            continue
        rx = re.compile(sig.pattern)
        want = sum(1 for ln in body if rx.search(ln) and not any(h.search(ln) for h in harmless))
        assert col.counts[sid] == want, sid
    assert report.causes


@pytest.mark.skipif(shutil.which("grep") is None, reason="no grep")
def test_patterns_mean_the_same_to_grep() -> None:
    """The benchmark feeds the same patterns to grep -E; they must select the same sample lines."""
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from bench_logs import to_ere

    for sid, sig in KB.signatures.items():
        lines = SECTIONS.get(sid)
        if not lines:
            continue  # reported by test_signature_matches_its_documented_lines
        res = subprocess.run(["grep", "-E", "-c", "-e", to_ere(sig.pattern)], input="\n".join(lines) + "\n",
                             capture_output=True, text=True, timeout=10, env={"LC_ALL": "C"}, check=False)
        assert res.returncode == 0, (sid, res.stderr)
        assert int(res.stdout) == len(lines), sid
