"""`distdoctor lint` on real cases: the recorded repro scripts of ../shared/fixtures/recorded and
scripts written from real threads in ../shared/fixtures/logs*; the rule that fires must point at
the cause the case's label gives."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixturekit import shared_fixtures

from distdoctor.probes.lint import lint_paths

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lint"

# recorded case -> (rule that must fire, text its message names)
RECORDED = {
    "02-torchrun-crashed-rank-stays-alive": ("DD903", "threading.Thread"),
    "10-torchrun-eval-allreduce-only-rank0": ("DD101", "evaluate() -> dist.all_reduce"),
    "12-torchrun-uneven-shards": ("DD201", "dist.all_reduce"),
    "14-accelerate-gather-only-main-process": ("DD101", "accelerator.gather"),
    "16-hf-trainer-rank0-export-on-save": ("DD801", "time.sleep()"),
    "30-accelerate-dataloader-not-prepared": ("DD503", "train_dl"),
    "32-lightning-no-distributed-sampler": ("DD504", "use_distributed_sampler"),
    "34-lightning-resume-node-local-ckpt-mismatch": ("DD703", "ckpt_path=resume"),
    "36-torchrun-metrics-group-allreduce-only-rank0": ("DD101", "evaluate() -> dist.all_reduce"),
}
# scripts written from the threads of logs/<case> -> rule
FROM_LOGS = {
    "040-hf-trainer-resume-divergent-tmp-output-dir": ("case_logs040_resume_tmpdir.py", "DD703"),
    "041-lightning-save-checkpoint-rank0-only-barrier": ("case_logs041_save_checkpoint_rank0.py", "DD101"),
    "049-sdscripts-latent-caching-exceeds-30min-watchdog": ("case_logs049_cache_latents_rank0.py", "DD801"),
    "043-torchtitan-validation-steps-uneven-batches-hang": ("case_logs043_validation_shards.py", "DD201"),
}
FROM_BATCH2 = {
    "223-transformers-fsdp-peft-save-state-dict-rank0-allgather": ("case_batch2_223_fsdp_save_rank0.py", "DD101"),
}


@pytest.mark.parametrize("case", sorted(RECORDED))
def test_recorded_repro_script(case: str) -> None:
    folder = shared_fixtures("recorded") / case
    label = json.loads((folder / "label.json").read_text())
    rule, names = RECORDED[case]
    result = lint_paths([str(folder / "repro")])
    assert result.errors == []
    hits = [f for f in result.findings if f.rule == rule]
    assert hits, [(f.rule, f.line) for f in result.findings]
    assert any(names in f.message for f in hits), [f.message for f in hits]
    assert hits[0].cause_id == label["primary"]


@pytest.mark.parametrize("case", sorted(FROM_LOGS) + sorted(FROM_BATCH2))
def test_script_written_from_a_real_thread(case: str) -> None:
    batch = "logs" if case in FROM_LOGS else "logs-batch2"
    label = json.loads((shared_fixtures(batch) / case / "label.json").read_text())
    name, rule = {**FROM_LOGS, **FROM_BATCH2}[case]
    found = lint_paths([str(FIXTURES / name)]).findings
    assert [f.rule for f in found] == [rule]
    assert found[0].cause_id in [label["primary"], *label.get("also", [])]


def test_every_recorded_script_parses_and_healthy_runs_hold_no_script() -> None:
    """Lint reads every repro script (no syntax errors, no crash); the healthy runs are logs only."""
    recorded = shared_fixtures("recorded")
    result = lint_paths([str(p / "repro") for p in sorted(recorded.iterdir()) if (p / "repro").is_dir()])
    assert result.errors == [] and len(result.files) == len(list(recorded.glob("*/repro/*.py")))
    assert list(shared_fixtures("healthy").glob("*/**/*.py")) == []
