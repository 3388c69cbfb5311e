"""The command line as the person on call meets it (issue 24, items 9 to 14): `stacks --native`
shows the native frames, `repro` prints its script's path (the script on request) and sets only
the Flight Recorder names the target torch reads, `drill run` shows each rank's phase, `lint`
puts the hang rules first, a Gloo bisection points at no GPU cause."""
from __future__ import annotations

from pathlib import Path

import pytest


def stacks_result() -> dict:
    frames = [{"name": "clock_nanosleep", "file": "libc.so.6", "line": 0, "native": True},
              {"name": "ncclProxyProgress", "file": "libnccl.so.2", "line": 0, "native": True},
              {"name": "all_reduce", "file": "/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py",
               "line": 2501},
              {"name": "train", "file": "train.py", "line": 40}]
    ranks = [{"rank": str(r), "pid": 100 + r, "host": "n1", "where": "all_reduce (train.py:40)", "frames": frames}
             for r in range(2)]
    return {"summary": "2 ranks in all_reduce (train.py:40)", "ranks": ranks,
            "groups": [{"ranks": ["0", "1"], "where": "all_reduce (train.py:40)", "frames": frames}],
            "odd": [], "culprit": None}


def test_stacks_native_shows_the_native_frames_and_plain_stacks_do_not() -> None:
    from distdoctor.tui.commands.stacks import render

    plain, native = render(stacks_result()), render(stacks_result(), native=True)
    assert "ncclProxyProgress" not in plain and "all_reduce (torch/distributed/distributed_c10d.py:2501)" in plain
    assert "ncclProxyProgress (libnccl.so.2)" in native and "clock_nanosleep (libc.so.6)" in native
    assert "train (train.py:40)" in native


def repro_result():
    from distdoctor.probes.repro import ReproResult

    return ReproResult("error", 3.0, {"ranks": {"0": 0, "1": 1}}, [], "/tmp/x/output.log", "/tmp/x",
                       "/tmp/x/script.py", [], {}, 2, 29500, progress={0: "done", 1: "barrier"},
                       manual="torchrun --nnodes 2 script.py", first_error="RuntimeError: boom")


def test_repro_prints_the_scripts_path_and_the_script_only_when_asked(monkeypatch) -> None:
    from distdoctor.tui.commands.repro_view import render_repro

    monkeypatch.setenv("COLUMNS", "100")
    short = render_repro(repro_result(), None, "", bisect_cmd="distdoctor bisect")
    assert "script: /tmp/x/script.py (--show-script prints it)" in short
    assert "import torch" not in short and "run it by hand on two nodes:" in short
    full = render_repro(repro_result(), None, "import torch\nprint('hi')\n")
    assert "script (/tmp/x/script.py):" in full and "import torch" in full


def test_repro_show_script_is_an_option() -> None:
    import argparse

    from distdoctor.tui.commands.repro import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    assert parser.parse_args(["repro", "--show-script"]).show_script is True
    assert parser.parse_args(["repro"]).show_script is False


@pytest.mark.parametrize("torch,wanted,unwanted", [
    ("2.13.0+cpu", {"TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE"},
     {"TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}),
    ("2.5.1", {"TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"},
     {"TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE"}),
    ("", {"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}, set()),
])
def test_repro_sets_only_the_flight_recorder_names_the_target_torch_reads(tmp_path: Path, torch, wanted,
                                                                           unwanted) -> None:
    from distdoctor.probes.repro import ReproOptions
    from distdoctor.probes.repro.run import run_env

    _, added = run_env(ReproOptions(torch=torch, base_env={"PATH": "/usr/bin"}), tmp_path)
    assert wanted <= set(added) and not unwanted & set(added)
    assert added["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"


def test_drill_progress_names_each_ranks_phase() -> None:
    from distdoctor.tui.commands.drill import drill_phases

    text = ("[default0]:[rank0] rank=0 local_rank=0 world_size=2\n"
            "[default1]:[rank1] 384 samples, 12 batches/epoch\n"
            "[default0]:[rank0] epoch 0 step 3/12 global_step 3 loss 0.5\n"
            "[default1]:[rank1] epoch 1 done in 2.0s\n"
            "[default0]:[rank0] training complete (global_step 24)\n")
    assert drill_phases(text) == [(0, "started"), (1, "data loaded"), (0, "step 3/12 (epoch 0)"),
                                  (1, "epoch 1 done"), (0, "finished")]


def test_drill_live_prints_phases_but_never_the_fault(capsys) -> None:
    import io

    from distdoctor.tui.commands.drill import DrillLive

    live = DrillLive(enabled=True)
    live.stream = io.StringIO()
    live.tty = False
    live.begin("crash")
    live.line("[default1]:[rank1] 384 samples, 12 batches/epoch\n")
    live.line("[default1]:[rank1]: ValueError: Corrupted record in shard-00001.bin\n")
    out = live.stream.getvalue()
    assert "crash: rank 1 data loaded" in out and "ValueError" not in out


def test_lint_puts_the_hang_rules_first() -> None:
    from distdoctor.probes.lint import lint_source

    source = '''
import random
import torch.distributed as dist

def main():
    dist.init_process_group("nccl")
    random.seed(0)
    torch.manual_seed(0)
    if dist.get_rank() == 0:
        dist.barrier()
'''
    found = lint_source(source, "train.py")
    rules = [f.rule for f in found]
    hang = [r for r in rules if r.startswith("DD1")]
    assert hang, rules
    assert rules[:len(hang)] == hang  # every DD1xx before the rest, whatever its line
    assert any(not r.startswith("DD1") and f.line < found[0].line for r, f in zip(rules, found)), rules


def test_a_gloo_bisection_points_at_no_gpu_cause() -> None:
    from distdoctor.knowledge import load_knowledge
    from distdoctor.probes.repro.bisect import BisectResult, after_a_pass

    kb = load_knowledge()

    class Passed:
        passed = True

        def to_dict(self) -> dict:
            return {"outcome": "pass"}

    gloo = BisectResult("gloo", Passed(), if_passed=after_a_pass(kb, "gloo")).to_dict()  # type: ignore[arg-type]
    nccl = BisectResult("nccl", Passed(), if_passed=after_a_pass(kb, "nccl")).to_dict()  # type: ignore[arg-type]
    assert "cuda-oom" not in gloo["points_at"] and "ib-rdma-failure" not in gloo["points_at"]
    assert "p2p-unsupported" not in gloo["rules_out"] and "nic-selection" in gloo["points_at"]
    assert "cuda-oom" in nccl["points_at"]


def test_the_jobs_python_is_read_from_traceback_paths(tmp_path: Path) -> None:
    from distdoctor.probes.repro.interpreter import from_log_files, log_files

    python = tmp_path / "env" / "bin" / "python3.10"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n", encoding="utf-8")
    python.chmod(0o755)
    rank = tmp_path / "logs" / "attempt_0" / "1"
    rank.mkdir(parents=True)
    (rank / "stderr.log").write_text(f'  File "{tmp_path}/env/lib/python3.10/site-packages/torch/nn/modules/'
                                     'module.py", line 1, in f\n', encoding="utf-8")
    (tmp_path / "logs" / "other.log").write_text('File "/nowhere/lib/python3.9/site-packages/torch/x.py"\n',
                                                 encoding="utf-8")
    found = from_log_files(log_files([str(tmp_path / "logs")]))
    assert found is not None and found.python == str(python) and "stderr.log" in found.how
    assert from_log_files([str(tmp_path / "logs" / "other.log")]) is None  # named, but not here
