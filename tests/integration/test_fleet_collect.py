"""distdoctor collect: a real snapshot of this machine validates against the schema."""
from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from fleet_gen import NODE_FACTS, fake_probes

from distdoctor.probes.base import ProbeContext, ProbeResult
from distdoctor.probes.fleet import SCHEMA_ID, snapshot, validate_snapshot
from distdoctor.probes.fleet.schema import PROBE_NAMES
from distdoctor.probes.registry import PROBES

DISTDOCTOR = Path(sys.executable).parent / "distdoctor"


def collect(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(DISTDOCTOR), "collect", *args], capture_output=True, text=True,
                          timeout=120)


def test_collect_on_this_machine_validates() -> None:
    proc = collect()
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert validate_snapshot(doc) == []
    assert doc["schema"] == SCHEMA_ID and doc["host"] == socket.gethostname()
    # every registered probe, the required ones first (the others are optional in a snapshot: older
    # ones lack them); a new probe needs no change here
    assert list(doc["probes"]) == list(PROBES) and list(PROBES)[:len(PROBE_NAMES)] == list(PROBE_NAMES)
    summary = doc["summary"]
    # facts that can be checked against this machine independently
    st = os.statvfs("/dev/shm")
    assert summary["shm_bytes"] == st.f_blocks * st.f_frsize
    try:
        torch = version("torch")
    except PackageNotFoundError:  # Python 3.10: torch 2.13 has no wheel for it
        torch = None
    assert summary["torch"] == torch
    assert os.path.samefile(doc["python"], sys.executable)


def test_collect_to_a_file_imports_neither_torch_nor_textual(tmp_path: Path) -> None:
    out = tmp_path / "node.json"
    code = ("import sys; from distdoctor.tui.cli import main; rc = main(['collect', '-o', sys.argv[1]]); "
            "print(rc, 'torch' in sys.modules, 'textual' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "0 False False\n"  # stdout stays clean for `-o /dev/stdout | jq`
    assert proc.stderr.startswith(f"wrote {out}: ")
    assert validate_snapshot(json.loads(out.read_text())) == []


def test_collect_for_another_interpreter(tmp_path: Path) -> None:
    # a second interpreter without torch: the snapshot says so instead of failing
    other = Path("/usr/bin/python3")
    if not other.exists():
        pytest.skip("no /usr/bin/python3 on this machine")
    check = subprocess.run([str(other), "-c", "import torch"], capture_output=True, timeout=60)
    if check.returncode == 0:
        pytest.skip("/usr/bin/python3 has torch")
    proc = collect("--python", str(other))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert validate_snapshot(doc) == []
    assert doc["python"] == str(other) and doc["summary"]["torch"] is None


def test_missing_interpreter_is_exit_2_one_line() -> None:
    proc = collect("--python", "/no/such/python")
    assert proc.returncode == 2
    assert proc.stderr.startswith("distdoctor: error: --python /no/such/python")
    assert proc.stderr.count("\n") == 1


def test_a_crashing_or_hanging_probe_still_gives_a_valid_snapshot() -> None:
    never = threading.Event()
    probes = fake_probes()

    def crash(ctx: ProbeContext) -> ProbeResult:
        raise RuntimeError("wedged NVML")

    def hang(ctx: ProbeContext) -> ProbeResult:
        never.wait()
        raise AssertionError("unreachable")

    probes["network"], probes["topology"] = crash, hang
    doc = snapshot(ProbeContext(), probes=probes, deadline=0.5)
    assert validate_snapshot(doc) == []
    assert doc["probes"]["network"]["status"] == "error"
    assert "wedged NVML" in doc["probes"]["network"]["reason"]
    assert doc["topology"]["status"] == "unavailable"
    assert "timed out" in doc["topology"]["reason"]
    # the compared fields still come from the probes that answered
    assert doc["summary"]["driver"] == "550.54.15" and doc["summary"]["gpu_count"] == 8
    assert doc["summary"]["gpu_model"] is None  # only the topology probe names the model
    never.set()


def test_topology_summary_and_mixed_models() -> None:
    facts = {k: dict(v) for k, v in NODE_FACTS.items()}
    facts["topology"] = {"source": "nvidia-smi", "p2p": {"0-1": "OK"}, "nvlink": False,
                         "gpus": [{"name": "NVIDIA A100"}, {"name": "NVIDIA A100"},
                                  {"name": "NVIDIA H100"}]}
    doc = snapshot(ProbeContext(), probes=fake_probes(facts))
    assert doc["topology"] == {"status": "ok", "reason": "", "source": "nvidia-smi", "gpu_count": 3,
                               "gpu_models": ["NVIDIA A100", "NVIDIA A100", "NVIDIA H100"],
                               "p2p": {"0-1": "OK"}, "nvlink": False}
    assert doc["summary"]["gpu_model"] == "NVIDIA A100 x2, NVIDIA H100 x1"


def test_findings_come_with_a_knowledge_base() -> None:
    from distdoctor.knowledge import load_knowledge

    facts = {k: dict(v) for k, v in NODE_FACTS.items()}
    # what the shm probe measures; checks.toml judges: too small (a failure), so not also nearly full (an ok)
    facts["shm"].update(size_bytes=64 << 20, free_bytes=60 << 20, size_human="64 MiB", free_human="60 MiB",
                        runtime="docker", fix="docker run --shm-size=16g ...")
    doc = snapshot(ProbeContext(), load_knowledge(use_env=False), probes=fake_probes(facts))
    assert validate_snapshot(doc) == []
    by_check = {f["check"]: f for f in doc["findings"]}
    # an empty list would pass a type check: the checks that apply must be there, judged
    assert by_check["shm-too-small"]["status"] == "fail"
    assert by_check["shm-too-small"]["cause_ids"] == ["shm-insufficient"]
    assert "64 MiB" in by_check["shm-too-small"]["title"]
    assert by_check["shm-nearly-full"]["status"] == "ok"
    assert all({"probe", "check", "status"} <= set(f) for f in doc["findings"])


def test_schema_problems_are_named() -> None:
    doc = snapshot(ProbeContext(), probes=fake_probes())
    broken = json.loads(json.dumps(doc))
    del broken["host"]
    broken["summary"]["gpu_count"] = True  # a bool is not a JSON integer
    broken["probes"]["shm"]["status"] = "fine"
    broken["schema"] = "distdoctor.snapshot/2"
    assert validate_snapshot(broken) == [
        "$: missing 'host'",
        "$.schema: expected 'distdoctor.snapshot/1', got 'distdoctor.snapshot/2'",
        "$.summary.gpu_count: expected integer or null, got boolean",
        "$.probes.shm.status: 'fine' is not one of ok, warn, fail, unavailable, error",
    ]
    assert validate_snapshot([]) == ["$: expected object, got array"]


def test_a_broken_install_is_a_bug_not_a_condition(monkeypatch: pytest.MonkeyPatch) -> None:
    # distdoctor's own modules are never optional: an ImportError of one is raised, not turned
    # into "not available in this build" (issue 11)
    monkeypatch.setitem(sys.modules, "distdoctor.probes.registry", None)
    with pytest.raises(ImportError, match="distdoctor.probes.registry"):
        snapshot(ProbeContext())


def test_snapshot_of_a_recorded_8_gpu_node() -> None:
    """The real probes, with the topology probe reading a recorded HGX H100 NVML."""
    fake = pytest.importorskip("topology_fake_nvml")
    from runnerkit import RecordedRunner

    from distdoctor.probes.registry import PROBES
    from distdoctor.probes.topology import probe_topology

    nvml = fake.FakePynvml.load("nvml-hgx-h100-8gpu-nvswitch.json")
    probes = dict(PROBES)
    probes["topology"] = lambda ctx: probe_topology(ProbeContext(runner=RecordedRunner({})), nvml=nvml)
    doc = snapshot(ProbeContext(), probes=probes)
    assert validate_snapshot(doc) == []
    assert (doc["summary"]["gpu_model"], doc["summary"]["gpu_count"]) == ("NVIDIA H100 80GB HBM3", 8)
    topo = doc["topology"]
    assert (topo["status"], topo["source"], topo["gpu_count"], topo["p2p"], topo["nvlink"]) == \
        ("ok", "nvml", 8, "all", True)


def test_output_through_a_link_or_into_a_fifo_keeps_them(tmp_path: Path) -> None:
    # renaming over -o replaced whatever was there: a symlink became a file, and as root a
    # device node such as /dev/null became a JSON file. A FIFO stands in for the device here.
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    proc = collect("-o", str(tmp_path / "link.json"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "link.json").is_symlink()
    assert validate_snapshot(json.loads((tmp_path / "real.json").read_text())) == []

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    proc = collect("-o", str(fifo))
    reader.join(60)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert validate_snapshot(json.loads(got[0])) == []


def test_collect_with_an_interpreter_that_does_not_answer_is_bad_usage() -> None:
    # it once wrote a snapshot of nulls and exited 0, where check said exit 2
    proc = collect("--python", "/bin/false")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("distdoctor: error: --python /bin/false: not a Python interpreter that "
                           "answers (exited 1: no output)\n")
