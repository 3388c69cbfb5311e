"""The HTML report in a real browser: headless Chromium (Debian's `chromium` package) renders a
report of the recorded incident and takes a screenshot; skipped where Chromium is absent.

The screenshot is kept under the test's tmp folder (its path is printed) for a person to look at;
the test checks what a browser can tell without a person: it loaded the file (the DOM it dumps
has the verdict first and the facts folded), and the picture is the requested size with content
(a blank page compresses to a few kilobytes)."""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

from distdoctor.tui.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BROWSER = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
pytestmark = [pytest.mark.skipif(BROWSER is None, reason="chromium not installed (apt-get install chromium)"),
              pytest.mark.slow]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([str(BROWSER), *FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=180)


@pytest.fixture
def report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    main(["logs", str(FIXTURES / "recorded" / "incident-crash" / "logs"), "--session", "web"])
    main(["check", "--only", "launch", "switches", "--session", "web"])
    main(["topo", "--input", str(FIXTURES / "topology" / "topo-m-8gpu-4nic-hybrid-cube-mesh.txt"),
          "--session", "web"])
    path = tmp_path / "report.html"
    assert main(["report", "web", "--format", "html", "-o", str(path)]) == 0
    capsys.readouterr()
    return path


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


def test_the_report_renders_in_chromium(report: Path) -> None:
    dom = chromium("--dump-dom", report.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert html.index("<h2>Verdict</h2>") < html.index("<h2>Conclusion</h2>") < html.index("<h2>Session</h2>")
    assert "Culprit: rank 1 (crashed)" in html and '<details class="facts">' in html
    assert '<div class="topo-pic"><svg' in html  # the inline picture survived parsing
    shot = report.with_suffix(".png")
    run = chromium(f"--screenshot={shot}", "--window-size=1200,2000", report.as_uri())
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    assert png_size(shot) == (1200, 2000)
    assert shot.stat().st_size > 40_000  # text and tables, not a blank page
    print(f"screenshot: {shot}")
    if os.environ.get("DISTDOCTOR_KEEP_SCREENSHOT"):
        shutil.copy(shot, os.environ["DISTDOCTOR_KEEP_SCREENSHOT"])
