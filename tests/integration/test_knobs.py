"""`distdoctor knobs`: the knob table per torch/NCCL version, checked against the installed torch
(its binary reads the names we advise; the buffer line really turns Flight Recorder on)."""
from __future__ import annotations

import importlib.util
import json
import mmap
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from distdoctor.probes.knobs import KNOBS, knob_lines, missing_sources, versions_of, vtuple
from distdoctor.tui.cli import main
from distdoctor.tui.commands.knobs import TITLES

# torch 2.13 has wheels for 3.11+ only: on 3.10 the tests that read the installed torch skip
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


def names(torch: str | None, nccl: str | None, **kw) -> set[str]:
    return {k.line.split("=")[0] if k.kind == "env" else k.line for k in knob_lines(torch, nccl, **kw)}


def test_table_is_well_formed() -> None:
    for k in KNOBS:
        assert k.source in TITLES
        if k.kind == "env":
            assert re.fullmatch(r"[A-Z][A-Z0-9_]*=\S+", k.line), k.line
        for low, high in ((k.torch_min, k.torch_max), (k.nccl_min, k.nccl_max)):
            if low and high:
                assert vtuple(low) < vtuple(high)


def test_flight_recorder_names_follow_the_torch_version() -> None:
    old = names("2.7.1+cu126", "2.26.2")
    assert {"TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"} <= old
    assert not {"TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE"} & old
    mid = names("2.9.1+cu128", "2.27.3")
    assert {"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"} <= mid
    new = names("2.13.0+cu130", "2.28.9")
    assert {"TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DUMP_ON_TIMEOUT"} <= new
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in new
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING" in new and "NCCL_ASYNC_ERROR_HANDLING" not in new
    assert "NCCL_ASYNC_ERROR_HANDLING" in names("2.1.2+cu121", "2.18.1")
    assert "TORCH_NCCL_DUMP_ON_TIMEOUT" not in names("2.1.2+cu121", "2.18.1")


def test_async_error_handling_line_explains_its_values() -> None:
    (line,) = [k for k in knob_lines("2.13.0", "2.28.9") if k.line.startswith("TORCH_NCCL_ASYNC")]
    assert line.line == "TORCH_NCCL_ASYNC_ERROR_HANDLING=3"
    for words in ("0 none", "1 abort communicator and tear down", "2 abort only",
                  "3 tear down without abort (the default)", "dumps need 3"):
        assert words in line.what


def test_ras_follows_the_nccl_version() -> None:
    assert not {"NCCL_RAS_ENABLE", "ncclras"} & names("2.5.1", "2.21.5")
    assert missing_sources("2.5.1", "2.21.5") == ["NCCL RAS: needs NCCL 2.24 or later (found 2.21.5)"]
    assert {"NCCL_RAS_ENABLE", "ncclras"} <= names("2.7.0", "2.26.2")
    assert "ncclras -f json" in names("2.9.0", "2.28.7") and "ncclras" not in names("2.9.0", "2.28.7")


def test_cpu_build_drops_nccl_lines_and_unknown_keeps_every_alternative() -> None:
    cpu = names("2.13.0+cpu", None, has_nccl=False)
    assert not any(n.startswith("NCCL_") for n in cpu) and "TORCH_NCCL_DUMP_ON_TIMEOUT" not in cpu
    assert "TORCH_FR_BUFFER_SIZE" in cpu and "TORCH_DISTRIBUTED_DEBUG" in cpu
    assert any("no NCCL" in why for why in missing_sources("2.13.0+cpu", None, has_nccl=False))
    every = knob_lines(None, None)
    assert len(every) == len(KNOBS)
    labels = {k.line: k.applies for k in every}
    assert labels["TORCH_NCCL_TRACE_BUFFER_SIZE=2000"] == "2.5 <= torch < 2.9"
    assert labels["TORCH_FR_BUFFER_SIZE=2000"] == "torch >= 2.9"
    assert labels["NCCL_DEBUG=INFO"] == "NCCL (CUDA builds)"


def test_versions_of_probe_facts() -> None:
    gpu = {"torch": {"present": True, "version": "2.7.1+cu126", "cuda": "12.6", "nccl": "2.26.2"},
           "nccl": {"loaded": "2.26.2", "versions": ["2.26.2"]}}
    assert versions_of(gpu) == ("2.7.1+cu126", "2.26.2", True)
    cpu = {"torch": {"present": True, "version": "2.13.0+cpu", "cuda": None}, "nccl": {"versions": []}}
    assert versions_of(cpu) == ("2.13.0+cpu", None, False)
    assert versions_of({"torch": {"present": False}}) == (None, None, None)


@needs_torch
def test_installed_torch_reads_the_names_we_advise() -> None:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    lib = Path(spec.origin).parent / "lib" / "libtorch_cpu.so"
    if not lib.exists():
        pytest.skip("no libtorch_cpu.so in this torch")
    torch_version = json.loads(subprocess.run(
        [sys.executable, "-c", "import json, torch.version as v; print(json.dumps(v.__version__))"],
        capture_output=True, text=True, timeout=120, check=True).stdout)
    advised = {k.line.split("=")[0] for k in KNOBS
               if k.kind == "env" and k.line.startswith(("TORCH_NCCL_", "TORCH_FR_"))}
    # what we advise for this torch with NCCL, and the old names we say are still read
    wanted = {n for n in advised if n in names(torch_version, "2.28.9")} | {"TORCH_NCCL_TRACE_BUFFER_SIZE",
                                                                            "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}
    assert {"TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DUMP_ON_TIMEOUT"} <= wanted
    headers = " ".join(p.read_text(errors="replace")
                       for p in (lib.parent.parent / "include/torch/csrc/distributed/c10d").glob("*.hpp"))
    rest = [n for n in sorted(wanted) if f'"{n}"' not in headers]  # NCCL-only names live in headers
    with open(lib, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        missing = [n for n in rest if data.find(n.encode() + b"\0") < 0]
    assert missing == []


@pytest.mark.slow
@needs_torch
def test_buffer_lines_are_read_by_the_installed_torch() -> None:
    # one-rank Gloo jobs, run side by side: the advised line keeps the all_reduce in the dump, and
    # each name set to 0 empties it (recent torch records by default, so 0 proves the name is read)
    code = ("import json, torch, torch.distributed as d\n"
            "d.init_process_group('gloo', init_method='tcp://127.0.0.1:0', rank=0, world_size=1)\n"
            "d.all_reduce(torch.ones(2))\n"
            "doc = json.loads(torch._C._distributed_c10d._dump_fr_trace_json())\n"
            "print(len(doc.get('entries', [])))\n")
    env = {k: v for k, v in os.environ.items() if "BUFFER_SIZE" not in k}
    cases = {("TORCH_FR_BUFFER_SIZE", "2000"): "1", ("TORCH_FR_BUFFER_SIZE", "0"): "0",
             ("TORCH_NCCL_TRACE_BUFFER_SIZE", "0"): "0"}
    procs = {case: subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True, env={**env, case[0]: case[1]})
             for case in cases}
    got = {case: proc.communicate(timeout=240)[0].split()[-1] for case, proc in procs.items()}
    assert got == cases


def fake_python(tmp_path: Path, torch: dict) -> Path:
    """An interpreter stand-in that answers the versions probe as a CUDA torch would (no GPU here)."""
    answer = {"python": {"version": "3.11.9"}, "torch": torch, "nccl_packages": [], "nccl_libs": []}
    exe = tmp_path / "python"
    exe.write_text(f"#!/bin/sh\necho DISTDOCTOR_STARTED\necho 'DISTDOCTOR_JSON:{json.dumps(answer)}'\n")
    exe.chmod(0o755)
    return exe


def test_cli_for_a_cuda_stack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exe = fake_python(tmp_path, {"present": True, "version": "2.7.1+cu126", "cuda": "12.6",
                                 "imported": True, "nccl": "2.26.2"})
    assert main(["knobs", "--python", str(exe), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["torch"], doc["nccl"], doc["has_nccl"]) == ("2.7.1+cu126", "2.26.2", True)
    lines = {x["line"] for x in doc["lines"]}
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE=2000" in lines and "NCCL_DEBUG_FILE=/tmp/nccl.%h.%p.log" in lines
    assert main(["knobs", "--python", str(exe)]) == 0
    out = capsys.readouterr().out
    assert "export TORCH_NCCL_DUMP_ON_TIMEOUT=1" in out and "[torch >= 2.5, NCCL (CUDA builds)]" in out
    assert "torchrun --log-dir ./rank-logs --redirects 3 --tee 3" in out


@needs_torch
def test_cli_this_interpreter_and_bad_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["knobs", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["torch"].startswith("2.13") and doc["has_nccl"] is False
    assert "TORCH_FR_BUFFER_SIZE=2000" in {x["line"] for x in doc["lines"]}
    assert main(["knobs", "--python", str(tmp_path / "nope")]) == 2
    script = tmp_path / "notpython"
    script.write_text("#!/bin/sh\necho hello\n")
    script.chmod(0o755)
    assert main(["knobs", "--python", str(script)]) == 2
    err = capsys.readouterr().err
    assert "not a Python interpreter that answers" in err and "Traceback" not in err


def test_knobs_toml_is_validated_on_load() -> None:
    from distdoctor.probes.knobs import parse_knobs

    entry = {"source": '"ras"', "line": '"NCCL_RAS_ENABLE=1"', "what": '"x"', "nccl_min": '"2.24"'}

    def toml(**change: str) -> str:
        return "[[knob]]\n" + "".join(f"{k} = {v}\n" for k, v in {**entry, **change}.items())

    assert parse_knobs(toml())[0].nccl_min == "2.24"
    for change, why in (({"source": '"elsewhere"'}, "source must be one of"),
                        ({"colour": '"red"'}, r"unknown key\(s\) colour"),
                        ({"torch_min": '"new"'}, "torch_min must be a version"),
                        ({"kind": '"shell"'}, "kind one of"),
                        ({"needs_nccl": '"yes"'}, "needs_nccl must be true or false"),
                        ({"what": '""'}, "must be non-empty strings")):
        with pytest.raises(ValueError, match=why):
            parse_knobs(toml(**change))


def test_the_log_switches_are_the_knob_table_s() -> None:
    from distdoctor.probes.knobs import log_switches

    switches = dict(log_switches("./logs/"))
    assert switches["NCCL_DEBUG"] == "INFO" and switches["TORCH_DISTRIBUTED_DEBUG"] == "DETAIL"
    assert switches["NCCL_DEBUG_FILE"] == "./logs/nccl.%h.%p.log"
