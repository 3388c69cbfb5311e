"""Facts the knowledge base states, checked against their sources: torch's headers and launcher code,
a shell that runs the suggested commands, and NCCL INFO lines written in NCCL's formats."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import MappingProxyType

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.evaluate import evaluate
from distdoctor.probes.base import OK, ProbeContext, ProbeResult
from distdoctor.probes.switches import DEPRECATED, NOT_READ, probe_switches
from distdoctor.probes.topology import analyse as analyse_topology

KB = load_knowledge(use_env=False)


def texts() -> list[tuple[str, str]]:
    """(where, text) for every piece of prose and every fix in causes, checks, switches and the tree."""
    out: list[tuple[str, str]] = []
    for c in KB.causes.values():
        out += [(f"cause {c.id}", t) for t in (c.what, c.why, c.fix, c.evidence)]
        out += [(f"cause {c.id} fix", f.text + "\n" + f.note) for f in c.fixes]
    for k in KB.checks.values():
        out += [(f"check {k.id}", t) for t in (k.title, k.detail, k.fix, k.ok_title or "")]
    for s in KB.switches.values():
        out += [(f"switch {s.id}", t) for t in (s.why, s.permanent_fix)]
    return out


def torch_header(name: str) -> str:
    """A c10d header of the installed torch (the test extra's); skip where torch ships none."""
    torch = pytest.importorskip("torch")
    path = Path(torch.__file__).parent / "include/torch/csrc/distributed/c10d" / name
    if not path.is_file():
        pytest.skip(f"torch {torch.__version__} ships no {name}")
    return path.read_text(encoding="utf-8")


def cvar_aliases() -> dict[str, list[str]]:
    """Every name list torch passes to getCvar*: static vectors and inline {"NEW", "OLD"} lists."""
    text = torch_header("ProcessGroupNCCL.hpp") + torch_header("FlightRecorder.hpp")
    lists = re.findall(r"std::vector<std::string>\s+\w+\s*=\s*\{([^}]*)\}", text)
    lists += re.findall(r"getCvar(?:Int|Bool|String)\(\s*\{([^}]*)\}", text)
    out = {}
    for body in lists:
        names = re.findall(r'"(\w+)"', body)
        if names:
            out[names[0]] = names
    return out


def switch_findings(tmp_path: Path, env: dict[str, str]) -> dict:
    (tmp_path / "root/etc").mkdir(parents=True, exist_ok=True)
    (tmp_path / "home").mkdir(exist_ok=True)
    ctx = ProbeContext(root=tmp_path / "root", home=tmp_path / "home", env=env)
    return {f.check: f for f in evaluate(KB, {"switches": probe_switches(ctx)})}


# --- GPU count: visible devices, not the node's --------------------------------------------------

def test_no_gpu_count_from_nvidia_smi_list() -> None:
    """`nvidia-smi -L | wc -l` counts every GPU of the node and ignores CUDA_VISIBLE_DEVICES."""
    commands = [(c.id, f.text) for c in KB.causes.values() for f in c.fixes]
    commands += [(k.id, k.fix) for k in KB.checks.values()] + [(s.id, s.permanent_fix) for s in KB.switches.values()]
    assert [w for w, t in commands if re.search(r"nvidia-smi\s+-L\s*\|\s*wc", t)] == []


def test_rank_count_fix_counts_visible_gpus() -> None:
    fixes = [f.text for f in KB.causes["rank-env-mismatch"].fixes]
    assert "torchrun --nproc-per-node=gpu train.py" in fixes
    count = next(t for t in fixes if "device_count" in t)
    torch = pytest.importorskip("torch")
    # torchrun's own reading of "gpu": torch.cuda.device_count(); a value it did not know would say
    # "Unsupported nproc_per_node value"; on a CPU build it says CUDA is not available instead.
    from torch.distributed.run import determine_local_world_size
    if torch.cuda.is_available():
        assert determine_local_world_size("gpu") == torch.cuda.device_count()
    else:
        with pytest.raises(ValueError, match="Cuda is not available"):
            determine_local_world_size("gpu")
    # the count command runs as written (python -c "...") and prints one integer
    code = re.search(r'python -c "(.*)"', count.replace('\\"', '"')).group(1)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"}, check=True)
    assert res.stdout.strip() == "0"  # nothing visible, whatever the node has


# --- one MASTER_PORT for every node -----------------------------------------------------------------

def test_no_per_node_free_port_export() -> None:
    """`export MASTER_PORT=$(<bind a free port>)` run by each node gives each node its own port."""
    for where, t in texts():
        assert not re.search(r"MASTER_PORT=\$\(\s*python[^)]*bind", t), where
    for f in KB.causes["master-addr-port"].fixes:
        if "bind((" in f.text:
            assert "rank-0 host only" in f.note and "every node" in f.note, f.note
    assert "every node" in KB.causes["master-addr-port"].fix


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_slurm_port_line_gives_every_node_the_same_port(tmp_path: Path) -> None:
    line = next(f.text for f in KB.causes["master-addr-port"].fixes if "SLURM_JOB_ID" in f.text)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text("#!/bin/sh\nprintf 'node01\\nnode02\\n'\n")
    (fake / "scontrol").chmod(0o755)
    seen = set()
    for node in ("node01", "node02"):
        env = {"PATH": f"{fake}:/usr/bin:/bin", "SLURM_JOB_ID": "41234", "SLURM_JOB_NODELIST": "node[01-02]",
               "SLURMD_NODENAME": node}
        res = subprocess.run(["bash", "-c", line + '\necho "$MASTER_ADDR $MASTER_PORT"'], env=env,
                             capture_output=True, text=True, timeout=30, check=True)
        seen.add(res.stdout.strip())
    assert seen == {"node01 21234"}


# --- TORCH_NCCL_ASYNC_ERROR_HANDLING ---------------------------------------------------------------

def test_error_handling_modes_match_torch() -> None:
    text = torch_header("ProcessGroupNCCL.hpp")
    modes = dict((int(v), k) for k, v in re.findall(r"(\w+) = (\d)", re.search(
        r"enum ErrorHandlingMode \{(.*?)\}", text, re.S).group(1)))
    assert modes == {0: "NoHandling", 1: "TearDown", 2: "CleanUpOnly", 3: "SkipCleanUp"}
    assert "SHOULD_CLEAN_UP(a) (a != NoHandling && a != SkipCleanUp)" in text  # 3 does not abort
    assert "default value (3 - SkipCleanUp)" in text
    note = next(f.note for f in KB.causes["rank-crash-deadlock"].fixes if "ASYNC_ERROR_HANDLING" in f.text)
    for words in ("3 (the default)", "without aborting", "1 aborts them, then tears down", "2 aborts only",
                  "0 does nothing", "Flight Recorder dumps need 3"):
        assert words in note, words


def test_nothing_says_mode_3_aborts() -> None:
    for where, t in texts():
        for m in re.finditer(r"ASYNC_ERROR_HANDLING=3", t):
            near = t[m.start():m.start() + 120].lower()
            assert "abort and tear" not in near and "aborts and tears" not in near, where


def test_dump_on_timeout_with_another_mode_is_flagged(tmp_path: Path) -> None:
    found = switch_findings(tmp_path, {"TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"})
    assert found["flight-recorder-dump-blocked"].status == "warn"
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING=1" in found["flight-recorder-dump-blocked"].title
    found = switch_findings(tmp_path, {"TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"})
    assert found["flight-recorder-dump-blocked"].status == "ok"
    found = switch_findings(tmp_path, {"TORCH_NCCL_DUMP_ON_TIMEOUT": "1"})  # unset: the default 3
    assert found["flight-recorder-dump-blocked"].status == "ok"


# --- Flight Recorder names -------------------------------------------------------------------------

FR_NAMES = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT",
            "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")


def test_flight_recorder_fix_names_both_generations() -> None:
    fixes = "\n".join(f.text + " " + f.note for f in KB.causes["collective-timeout"].fixes)
    for name in FR_NAMES:
        assert name in fixes, name
    assert "torchfrtrace" in fixes


def test_flight_recorder_off_under_the_old_name(tmp_path: Path) -> None:
    found = switch_findings(tmp_path, {"TORCH_NCCL_TRACE_BUFFER_SIZE": "0"})
    off = found["flight-recorder-off"]
    assert off.status == "warn" and "TORCH_NCCL_TRACE_BUFFER_SIZE=0" in off.title
    assert off.fix.startswith("unset TORCH_NCCL_TRACE_BUFFER_SIZE; export TORCH_FR_BUFFER_SIZE=2000")
    for name in FR_NAMES:
        assert name in off.fix + off.detail, name
    # the new name wins over the old one, as getCvarInt reads it last
    found = switch_findings(tmp_path, {"TORCH_NCCL_TRACE_BUFFER_SIZE": "0", "TORCH_FR_BUFFER_SIZE": "2000"})
    assert found["flight-recorder-off"].status == "ok"


def test_flight_recorder_names_are_torchs() -> None:
    aliases = cvar_aliases()
    assert aliases["TORCH_FR_BUFFER_SIZE"] == ["TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"]
    assert "TORCH_NCCL_DUMP_ON_TIMEOUT" in aliases
    assert '"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}, 2000' in torch_header("FlightRecorder.hpp")


# --- old variable names: still read, with a warning ------------------------------------------------

def test_deprecated_table_matches_torchs_alias_lists() -> None:
    aliases = cvar_aliases()
    checked = 0
    for old, new in DEPRECATED.items():
        if new not in aliases:
            continue  # read in a .cpp torch does not ship (TORCH_FR_DUMP_TEMP_FILE)
        checked += 1
        assert (old in aliases[new]) == (old not in NOT_READ), (old, new, aliases[new])
    assert checked >= 6
    # getCvar* reads the list backwards and warns for any name but the first: old names still count
    utils = torch_header("Utils.hpp")
    assert "WARN_ENV_VAR_ONCE(env[i], env[0])" in utils and "is deprecated; use" in utils


def test_deprecated_check_says_old_names_still_work(tmp_path: Path) -> None:
    found = switch_findings(tmp_path, {"NCCL_ASYNC_ERROR_HANDLING": "1"})["deprecated-variable"]
    assert found.status == "warn"
    assert "still works" in found.detail and "is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING" in found.detail
    assert "read only the new" not in found.detail and "ignored" not in found.detail
    both = switch_findings(tmp_path, {"NCCL_BLOCKING_WAIT": "1", "TORCH_NCCL_BLOCKING_WAIT": "0"})
    assert "TORCH_NCCL_BLOCKING_WAIT=0 is also set and wins" in both["deprecated-variable"].detail
    gone = switch_findings(tmp_path, {"NCCL_AVOID_RECORD_STREAMS": "1"})["deprecated-variable"]
    assert "no longer read" in gone.detail and "no effect" in gone.detail


# --- SHM in NCCL INFO lines is no proof against P2P --------------------------------------------------
# Lines in NCCL's formats: init.cc "comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx ...
# - Init START", transport.cc "Channel %02d/%d : %d[%d] -> %d[%d] via %s", paths.cc "P2P is disabled
# between connected GPUs %d and %d. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.",
# param.cc "%s set by environment to %s.".
INIT = ("node01:4101:4101 [0] NCCL INFO comm 0x55d0c0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 "
        "commId 0x5e1f - Init START\n"
        "node01:4102:4102 [1] NCCL INFO comm 0x55d0c8 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 81000 "
        "commId 0x5e1f - Init START\n")
SHM = ("node01:4101:4160 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n"
       "node01:4102:4161 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct\n")


def topo_findings(text: str) -> tuple[dict, dict]:
    facts = analyse_topology(text)
    found = {f.check: f for f in evaluate(KB, {"topology": ProbeResult("topology", OK, MappingProxyType(facts))})}
    return facts, found


def test_shm_alone_leaves_p2p_unknown() -> None:
    facts, found = topo_findings(INIT + SHM)
    assert facts["p2p"] == "unknown"
    assert facts["pairs_without_p2p"] == []
    assert found["gpu-pairs-without-p2p"].status == "ok"
    assert any("normal choice" in n and "nvidia-smi topo -p2p r" in n for n in facts["notes"])


def test_p2p_disabled_line_is_proof() -> None:
    line = ("node01:4101:4101 [0] NCCL INFO P2P is disabled between connected GPUs 0 and 1. You can repress "
            "this message with NCCL_IGNORE_DISABLED_P2P=1.\n")
    facts, found = topo_findings(INIT + line + SHM)
    assert facts["p2p"] == "none" and facts["pairs_without_p2p"] == ["GPU0-GPU1"]
    assert found["gpu-pairs-without-p2p"].status == "warn"


def test_p2p_switched_off_says_nothing_of_the_hardware() -> None:
    env = "node01:4101:4101 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.\n"
    facts, found = topo_findings(env + INIT + SHM)
    assert facts["p2p"] == "unknown" and found["gpu-pairs-without-p2p"].status == "ok"
    assert any("NCCL_P2P_DISABLE=1" in n for n in facts["notes"])


def test_p2p_in_use_is_seen() -> None:
    facts, _ = topo_findings(INIT + SHM.replace("SHM/direct/direct", "P2P/IPC"))
    assert facts["p2p"] == "all"
