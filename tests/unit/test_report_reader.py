"""The report read by someone who was not there: causes with their basis and evidence (no bare
scores), the ones nothing points at folded under "also considered", the raw facts folded by
probe, long values breaking at separators, a topology drawing readable at 100% with whole NIC
names. Sessions are made by the real commands on a recorded Gloo incident."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from distdoctor.probes.topology import load_input, to_svg
from distdoctor.tui.cli import main
from distdoctor.tui.record.report_html import wrap

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
INCIDENT = FIXTURES / "recorded" / "incident-crash" / "logs"
TOPO = FIXTURES / "topology" / "topo-m-8gpu-4nic-hybrid-cube-mesh.txt"


@pytest.fixture
def reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """md, html and json of one session: the incident's logs, a check, the topology."""
    # the symptom gives priors to fold under "also considered" (advisory checks are never causes)
    assert main(["logs", str(INCIDENT), "--symptom", "error", "--session", "inc"]) == 1
    main(["check", "--only", "launch", "shm", "switches", "--session", "inc"])
    assert main(["topo", "--input", str(TOPO), "--session", "inc"]) == 0
    out = {}
    for fmt in ("md", "html", "json"):
        assert main(["report", "inc", "--format", fmt, "-o", str(tmp_path / f"r.{fmt}")]) == 0
        out[fmt] = (tmp_path / f"r.{fmt}").read_text()
    capsys.readouterr()
    return out


def section(text: str, start: str, end: str) -> str:
    return text[text.index(start):text.index(end, text.index(start))]


def test_causes_show_basis_and_evidence_not_scores(reports: dict[str, str]) -> None:
    md = section(reports["md"], "## Conclusion", "## Switches to remove")
    assert "**`rank-crash-deadlock`** A rank died" in md and "(basis: evidence: 8 log lines)" in md
    assert "`1/stderr.log:6: [rank1]: RuntimeError: bad batch at step 5" in md  # the rank's own file
    assert "(score" not in md and not re.search(r"score \d", md)
    html = section(reports["html"], "<h2>Conclusion</h2>", "<h2>Switches to remove later</h2>")
    assert "basis: evidence: 8 log lines" in html and "1/stderr.log:6" in html
    assert "(score" not in html and not re.search(r"score \d", html)
    steps = section(reports["md"], "## Steps taken", "## Findings")
    assert "(score" not in steps and "top cause rank-crash-deadlock (basis evidence)" in steps


def test_causes_nothing_points_at_are_folded_under_also_considered(reports: dict[str, str]) -> None:
    doc = json.loads(reports["json"])
    causes = doc["conclusion"]["causes"]
    considered = [c["id"] for c in causes if c["considered"]]
    shown = [c["id"] for c in causes if not c["considered"]]
    assert shown[0] == "rank-crash-deadlock" and considered  # what only the symptom or facts point at
    assert all(c["basis"] != "evidence" for c in causes if c["considered"]), causes
    md = reports["md"]
    folded = section(md, "<details><summary>Also considered", "</details>")
    assert all(f"`{cid}`" in folded for cid in considered) and "rank-crash-deadlock" not in folded
    assert "<details><summary>Also considered" in reports["html"]
    # a fix is given for what the evidence points at, not for what was only considered
    assert [f["cause"] for f in doc["fixes"]] == shown[:3]


def test_raw_facts_are_folded_and_grouped_by_probe(reports: dict[str, str]) -> None:
    html = reports["html"]
    facts = section(html, "<h2>Environment facts</h2>", "</details>")
    assert facts.count("<details") == 1 and "<details open" not in facts
    probes = re.findall(r"<h3>([a-z]+)</h3>", facts)
    assert probes == sorted(probes) and {"launch", "shm", "switches"} <= set(probes)
    md = section(reports["md"], "## Environment facts", "</details>")
    assert "<details><summary>" in md and "**launch**" in md and "**shm**" in md
    assert reports["md"].index("## Verdict") < reports["md"].index("## Environment facts")


def test_long_values_break_after_separators_not_mid_word() -> None:
    path = "/opt/venvs/train/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so"
    out = wrap(path)
    assert out.replace("<wbr>", "") == path
    pieces = out.split("<wbr>")
    assert len(pieces) > 5 and all(p[-1] in "/_.:=,;-" for p in pieces[:-1])
    assert wrap("NCCL_SOCKET_IFNAME=<eth0>") == "NCCL_<wbr>SOCKET_<wbr>IFNAME=&lt;eth0&gt;"
    assert wrap("short words stay as they are") == "short words stay as they are"


def test_html_cells_do_not_break_anywhere(reports: dict[str, str]) -> None:
    css = reports["html"][:reports["html"].index("</style>")]
    assert "overflow-wrap:anywhere" not in css and "word-break:break-all" not in css


def test_topology_is_drawn_larger_and_nic_names_are_whole(reports: dict[str, str]) -> None:
    html = reports["html"]
    m = re.search(r'<div class="topo-pic"><svg style="width:(\d+)px" [^>]*\bwidth="(\d+)"', html)
    assert m and int(m.group(1)) == int(m.group(2)) * 4 // 3
    facts = load_input(TOPO)
    long_names = ["mlx5_bond_0", "mlx5_bond_1", "mlx5_bond_2"]
    for gpu in facts["gpus"]:
        gpu["nearest_nics"] = list(long_names)
    svg = to_svg(facts)
    assert ", ".join(long_names) in svg  # nothing cut off a device name
    # the report draws it at 4/3 of its size: its smallest label reads at 12px or more
    assert min(int(s) for s in re.findall(r'font-size="(\d+)"', svg)) * 4 // 3 >= 12
