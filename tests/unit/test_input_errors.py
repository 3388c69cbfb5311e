"""One base for bad-input errors (knowledge.errors.InputError), mapped to one line and exit 2 in
one place (tui/cli.py:main): a command lets a probe's error propagate instead of re-raising it."""
from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from distdoctor.knowledge.errors import InputError
from distdoctor.tui.cli import main
from distdoctor.tui.errors import UsageError

BAD_INPUT = {  # module: the class its callers turn into "distdoctor: error: ..." and exit 2
    "distdoctor.probes.repro.nodes": "NodesInputError",
    "distdoctor.probes.repro.options": "ReproInputError",
    "distdoctor.probes.drill.run": "DrillError",
    "distdoctor.probes.recorded": "RecordedNodeError",
    "distdoctor.probes.flightrec.reader": "DumpError",
    "distdoctor.probes.topology.load": "TopologyInputError",
    "distdoctor.probes.sosarchive": "ArchiveError",
    "distdoctor.probes.fleet.batch": "SlurmError",
    "distdoctor.probes.fleet.hosts": "HostListError",
    "distdoctor.probes.fleet.fanout": "KubectlError",
    "distdoctor.probes.fleet.snapshot": "SnapshotError",
    "distdoctor.probes.debugserver": "DebugServerError",
    "distdoctor.tui.record.session": "SessionError",
    "distdoctor.tui.record.history.store": "HistoryError",
}


@pytest.mark.parametrize("module,name", sorted(BAD_INPUT.items()))
def test_every_bad_input_error_derives_from_the_one_base(module: str, name: str) -> None:
    assert issubclass(getattr(importlib.import_module(module), name), InputError)


def test_usage_error_is_an_input_error() -> None:
    assert issubclass(UsageError, InputError)


def test_a_probe_error_reaches_the_user_as_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    dump = tmp_path / "rank0.json"
    dump.write_text(json.dumps({"entries": "not a list"}), encoding="utf-8")  # DumpError, uncaught by fr
    assert main(["fr", str(dump)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("distdoctor: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert main(["topo", "--input", str(tmp_path / "missing.xml")]) == 2  # TopologyInputError
    assert capsys.readouterr().err.startswith("distdoctor: error: ")
