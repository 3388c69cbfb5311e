"""`check --prometheus FILE`: node_exporter textfile format, written atomically (issue 26)."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from distdoctor.tui.cli import main
from distdoctor.tui.commands.check_prometheus import metrics, write_atomic

HERE = Path(__file__).parents[1] / "fixtures" / "hardware"
# the exposition format: a metric name, optional {labels}, a value
SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*",?)*\})? -?[0-9.e+]+$')


def test_metrics_of_a_faulty_node(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "distdoctor.prom"
    rc = main(["check", "--root", str(HERE / "kernel-xid79-off-bus" / "root"), "--prometheus", str(out)])
    capsys.readouterr()
    assert rc == 1
    text = out.read_text()
    for line in text.splitlines():
        assert line.startswith("# HELP ") or line.startswith("# TYPE ") or SAMPLE.match(line), line
    assert ('distdoctor_check_status{host="kernel-xid79-off-bus",probe="kernel",check="xid-hardware-error"} 2'
            in text.splitlines())
    assert ('distdoctor_cause_findings{host="kernel-xid79-off-bus",cause="gpu-hardware-fault"} 4'
            in text.splitlines())
    assert 'distdoctor_probe_up{host="kernel-xid79-off-bus",probe="gpu_health"} 0' in text.splitlines()
    assert 'distdoctor_check_failed{host="kernel-xid79-off-bus"} 3' in text.splitlines()
    assert oct(out.stat().st_mode & 0o777) == "0o644"
    assert os.listdir(tmp_path) == ["distdoctor.prom"]  # no temporary file left behind


def test_healthy_node_has_no_problem_samples(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "node.prom"
    assert main(["check", "--root", str(HERE / "pcie-acs-off" / "root"), "--prometheus", str(out), "--json"]) == 0
    assert capsys.readouterr().out.startswith("{")  # --json still prints the result
    text = out.read_text()
    assert "distdoctor_check_problem{" not in text and 'distdoctor_check_failed{host="pcie-acs-off"} 0' in text


def test_labels_are_escaped_and_the_file_replaced_at_once(tmp_path: Path) -> None:
    data = {"host": 'a"b\\c\nd', "findings": [{"probe": "kernel", "check": "x", "status": "warn", "cause_ids": ["c"]}],
            "probes": {"kernel": {"status": "ok"}}}
    text = metrics(data, now=1.5)
    assert 'host="a\\"b\\\\c\\nd"' in text and "distdoctor_check_last_run_timestamp_seconds" in text
    target = tmp_path / "m.prom"
    target.write_text("old\n")
    write_atomic(str(target), text)
    assert target.read_text() == text and sorted(os.listdir(tmp_path)) == ["m.prom"]


def test_unwritable_folder_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc = main(["check", "--root", str(HERE / "pcie-acs-off" / "root"), "--prometheus",
               str(tmp_path / "missing" / "x.prom")])
    assert rc == 2 and "no such folder" in capsys.readouterr().err


def test_a_folder_is_refused_before_the_probes_run(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from distdoctor.probes import registry

    monkeypatch.setitem(registry.PROBES, "kernel", lambda ctx: pytest.fail("ran before the usage check"))
    rc = main(["check", "--root", str(HERE / "pcie-acs-off" / "root"), "--prometheus", str(tmp_path)])
    assert rc == 2 and "is a folder" in capsys.readouterr().err
