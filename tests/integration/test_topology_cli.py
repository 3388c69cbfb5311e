"""`distdoctor topo`: exit codes, one-line errors, --json shape, --dot, --session, 80 columns."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distdoctor.tui.cli import main
from distdoctor.tui.record.session import SessionStore

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "topology"
EIGHT = HERE / "topo-m-8gpu-4nic-hybrid-cube-mesh.txt"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["topo", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("content, problem", [
    (b"", "empty file"),
    (b"\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n", "truncated `nvidia-smi topo -m`"),
    (b"[tool.pytest]\naddopts = '-q'\n", "no GPU topology found"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00binary", "binary data"),
])
def test_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      content: bytes, problem: str) -> None:
    path = tmp_path / "topo.txt"
    path.write_bytes(content)
    code, out, err = run(capsys, "--input", str(path))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"distdoctor: error: {path}: ") and problem in err


def test_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--input", "/no/such/topo.txt")
    assert code == 2 and err == "distdoctor: error: /no/such/topo.txt: no such file\n"


def test_json_shape_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--input", str(HERE / "topo-m-and-p2p-r-4gpu-2socket.txt"), "--json")
    facts = json.loads(out)
    assert code == 1  # partial P2P needs action
    assert {"source", "gpus", "nics", "p2p", "nvlink", "pairs", "advice"} <= set(facts)
    assert facts["p2p"] == "partial" and facts["nvlink"] is False
    assert all({"a", "b", "link", "p2p"} <= set(p) for p in facts["pairs"])
    assert all(set(a) == {"text", "env"} and isinstance(a["env"], dict) for a in facts["advice"])
    code, out, _ = run(capsys, "--input", str(EIGHT), "--json")
    assert code == 0 and json.loads(out)["p2p"] == "all"
    code, out, _ = run(capsys, "--input", str(HERE / "topo-m-old-driver-soc-mlx4.txt"), "--json")
    assert code == 0 and json.loads(out)["p2p"] == "unknown"  # nothing proven missing: ask, not fail


def test_dot_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dot = tmp_path / "topo.dot"
    code, out, _ = run(capsys, "--input", str(EIGHT), "--dot", str(dot))
    text = dot.read_text()
    assert code == 0 and "GPU topology from topo-m" in out
    assert text.startswith("graph topology {") and text.rstrip().endswith("}")
    assert text.count("{") == text.count("}")
    assert '"GPU0" -- "GPU3" [label="NV2\\nP2P OK"' in text
    assert text.count("subgraph cluster_") == 2 and '"NIC0" [shape=ellipse, label="NIC0\\nmlx5_0"]' in text
    code, out, _ = run(capsys, "--input", str(EIGHT), "--dot", "-")
    assert out == text


def test_eighty_columns_for_8_gpus_and_4_nics(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--input", str(EIGHT))
    lines = out.splitlines()
    assert code == 0 and max(len(line) for line in lines) <= 80
    assert "NUMA 0 · CPUs 0-19,40-59" in lines and "  GPU0 ──PIX── NIC0 mlx5_0" in lines
    code, out, _ = run(capsys, "--input", str(EIGHT), "--matrix")
    assert max(len(line) for line in out.splitlines()) <= 80 and "GPU0  X     NV1" in out


def test_session_records_the_result(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run(capsys, "--input", str(EIGHT), "--session", "topo-test", "--json")
    events = SessionStore().load_or_create("topo-test")["events"]
    assert code == 0 and [e["kind"] for e in events] == ["topo"]
    assert events[0]["data"]["p2p"] == "all" and len(events[0]["data"]["gpus"]) == 8


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this host has nvidia-smi")
def test_no_source_says_why_and_what_to_run(tmp_path: Path) -> None:
    """A real process on this driverless machine: exit 0 (unavailable is not bad usage), one
    line, no traceback."""
    exe = Path(sys.executable).with_name("distdoctor")  # the installed console script
    proc = subprocess.run([str(exe), "topo"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.count("\n") == 1 and proc.stdout.startswith("unavailable: no NVIDIA driver")
    assert "nvidia-smi topo -m > topo.txt" in proc.stdout and "distdoctor topo --input topo.txt" in proc.stdout


def test_help_has_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["topo", "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and "distdoctor topo --input topo.txt" in out and "--dot" in out


@pytest.mark.parametrize("content, problem", [
    (b"\x00" * 4096, "binary data"),                                       # only NUL bytes
    (bytes(b % 255 + 1 for b in range(65536)) * 4, "binary data"),        # binary with no NUL at all
    (b'{"gpus": [{"id": "GPU0", "bus', "no GPU topology found"),           # truncated JSON
    (b'<system version="1">\n  <cpu numaid="0" affinity="ff">\n    <pci busid=', "NCCL topology XML that describes no GPU"),
], ids=["nul-only", "binary-without-nul", "truncated-json", "truncated-xml"])
def test_more_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           content: bytes, problem: str) -> None:
    path = tmp_path / "input"
    path.write_bytes(content)
    code, out, err = run(capsys, "--input", str(path), "--json")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"distdoctor: error: {path}: ") and problem in err


@pytest.mark.parametrize("path, problem", [
    ("/dev/null", "not a regular file (FIFO, device or socket); save the output to a file, or pipe "
                  "it to --input -"),  # a device, refused before any read, as `logs` does
    (".", "is a directory, not a file"),
])
def test_special_paths_are_one_line_exit_2(capsys: pytest.CaptureFixture[str], path: str,
                                           problem: str) -> None:
    code, out, err = run(capsys, "--input", path)
    assert code == 2 and out == "" and err == f"distdoctor: error: {path}: {problem}\n"


def test_empty_file_names_the_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.txt").write_bytes(b"")
    code, out, err = run(capsys, "--input", str(tmp_path / "empty.txt"))
    assert code == 2 and out == "" and err == (
        f"distdoctor: error: {tmp_path / 'empty.txt'}: empty file (expected `nvidia-smi topo -m` or "
        "`topo -p2p` output, NCCL topology XML or NCCL INFO lines)\n")


HOSTILE = {
    # one 2 MB line of word characters: the NCCL line detector rescanned it from every position
    "line.txt": (lambda: "a" * (2 << 20), "no GPU topology found"),
    # a cut-off XML tag followed by 2 MB of blanks: two adjacent \s* tried every split
    "blank.xml": (lambda: '<system version="1"><pci busid="0000:01:00.0" ' + " " * (2 << 20) + "x",
                  "NCCL topology XML that describes no GPU"),
    # 100,000 matrix rows: the "rows missing" note rebuilt a set of every row per column
    "rows.txt": (lambda: "GPU0 X\n" * 100_000, None),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))  # ids stay short: PYTEST_CURRENT_TEST is in env
def test_hostile_inputs_are_read_in_linear_time(tmp_path: Path, name: str) -> None:
    """Each took from minutes to hours before (quadratic work); the generous timeout only turns
    such a hang into a failure instead of a stuck test run."""
    make, problem = HOSTILE[name]
    path = tmp_path / name
    path.write_text(make())
    exe = Path(sys.executable).with_name("distdoctor")
    proc = subprocess.run([str(exe), "topo", "--input", str(path), "--json"], capture_output=True,
                          text=True, timeout=120)
    if problem is None:
        assert proc.returncode == 0 and json.loads(proc.stdout)["gpus"][0]["id"] == "GPU0"
    else:
        assert proc.returncode == 2 and proc.stdout == "" and problem in proc.stderr


@pytest.mark.parametrize("argv, clash", [
    (["--json", "--dot", "-"], "--dot - and --json"),
    (["--dot", "-", "--svg", "-"], "--dot - and --svg -"),
    (["--json", "--svg", "-"], "--svg - and --json"),
])
def test_two_documents_on_stdout_are_refused(capsys: pytest.CaptureFixture[str], argv: list[str],
                                             clash: str) -> None:
    """`--json --dot -` printed the graph and then the JSON: stdout was valid as neither."""
    code, out, err = run(capsys, "--input", str(EIGHT), *argv)
    assert code == 2 and out == ""
    assert err == (f"distdoctor: error: {clash} would both write to stdout: give the picture a "
                   "file name\n")


def test_svg_to_stdout_is_the_only_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--input", str(EIGHT), "--svg", "-")
    assert code == 0 and out.startswith("<svg") and "GPU topology from" not in out


def topo_process(*argv: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("distdoctor")
    proc = subprocess.run([str(exe), "topo", *argv], stdin=stdin, capture_output=True, text=True,
                          timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_non_regular_input_is_refused_not_read(tmp_path: Path, kind: str) -> None:
    """A FIFO nobody writes to blocked the read forever; /dev/zero never ends."""
    path = tmp_path / "topo.fifo"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    proc = topo_process("--input", str(path))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"distdoctor: error: {path}: not a regular file (FIFO, device or socket); "
                           "save the output to a file, or pipe it to --input -\n")


def test_dash_on_a_terminal_is_refused_with_a_hint() -> None:
    """`--input -` on a terminal waited, silently, for someone to type a matrix."""
    parent, child = os.openpty()
    try:
        proc = topo_process("--input", "-", stdin=child)
    finally:
        os.close(child)
        os.close(parent)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("distdoctor: error: --input - reads standard input, which is a terminal "
                           "here: pipe the output in, e.g. nvidia-smi topo -m | distdoctor topo --input -\n")


def test_dash_reads_a_pipe() -> None:
    proc = subprocess.run([str(Path(sys.executable).with_name("distdoctor")), "topo", "--input", "-",
                           "--json"], input=EIGHT.read_text(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and json.loads(proc.stdout)["p2p"] == "all"
