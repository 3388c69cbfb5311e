"""The twelve secret formats reports once let through (issue 25, item 10), the snapshot of
`collect` and `check --json` (item 9), and reports of sessions nested deeper than Python's
recursion limit (item 7): each planted secret is gone from every output, names are kept."""
from __future__ import annotations

import html
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from boundkit import run, sane

from distdoctor.tui.record.redact import MASK, redact, redact_env, redact_text

# (name, line, the secret that must be gone): ten shapes, then two with no shape of their own,
# decided by the name they are given to
PLANTED = [
    ("slack-app", "token xapp-1-A0123456789-1234567890123-0123456789abcdef0123456789abcdef0123456789abcdef",
     "A0123456789-1234567890123"),
    ("twilio", "twilio key SK0123456789abcdef0123456789abcdef in use", "0123456789abcdef0123456789abcdef"),
    ("databricks", "host=x.cloud.databricks.com dapi0123456789abcdef0123456789abcdef-2 ok",
     "0123456789abcdef0123456789abcdef"),
    ("mailgun", "mailgun api key-3ax6xnjp29jd6fds4gc373sgvjxteol0", "3ax6xnjp29jd6fds4gc373sgvjxteol0"),
    ("shopify", "X-Shopify-Access shpat_0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"),
    ("digitalocean", "doctl auth init dop_v1_" + "0123456789abcdef" * 4, "0123456789abcdef" * 4),
    ("age", "AGE-SECRET-KEY-1QQPQZQ0Z6YQ5TQQ8Y3ZQFJ8WQ4YS7Z9Z9Z9Z9Z9Z9Z9Z9Z9Z9Z9Z9Z9Z9Z9Z9Z9Z9QSGKQ3",
     "QQPQZQ0Z6YQ5TQQ8Y3ZQFJ8WQ4YS7"),
    ("atlassian", "jira token ATATT3xFfGF0T0kenBodyAbCdEfGh1234567890_-xyzXYZ=ABCD1234 end",
     "xFfGF0T0kenBodyAbCdEfGh1234567890"),
    ("sendgrid", "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",
     "ngeVfQFYQlKU0ufo8x5d1A"),
    ("signed-url", "GET https://b.s3.amazonaws.com/k?AWSAccessKeyId=AKIDEXAMPLE&Expires=1&Signature=vjbyPxybdZaNmGa%2ByT272YEAiv4%3D",
     "vjbyPxybdZaNmGa"),
    ("bare-password", "export DB_PW=Tr0ub4dor&3xyz", "Tr0ub4dor&3xyz"),
    ("uuid-under-a-plain-name", "export NEWRELIC_ACCOUNT=8f14e45f-ceea-467f-a0f4-1e5a1b1c2d3e",
     "8f14e45f-ceea-467f-a0f4-1e5a1b1c2d3e"),
]
KEPT = ["CUDA_VISIBLE_DEVICES=GPU-8f14e45f-ceea-467f-a0f4-1e5a1b1c2d3e",
        "run_id: 8f14e45f-ceea-467f-a0f4-1e5a1b1c2d3e", "skipped 3 tasks", "SKU A100-SXM4-80GB",
        "key-value store at node-1:29500", "signature verified for the wheel", "age 32 years",
        "PIN_MEMORY=true", "SG.x is short", "pw: see the vault"]


@pytest.mark.parametrize("name,line,secret", PLANTED, ids=[p[0] for p in PLANTED])
def test_planted_format_is_masked(name: str, line: str, secret: str) -> None:
    out = redact_text(line)
    assert secret not in out and MASK in out, out
    assert redact_text(out) == out


@pytest.mark.parametrize("line", KEPT)
def test_look_alikes_are_kept(line: str) -> None:
    assert redact_text(line) == line


def test_names_decide_for_values_with_no_shape() -> None:
    env = {"DB_PW": "hunter2", "NEWRELIC_ACCOUNT": "8f14e45f-ceea-467f-a0f4-1e5a1b1c2d3e",
           "NVIDIA_VISIBLE_DEVICES": "GPU-8f14e45f-ceea-467f-a0f4-1e5a1b1c2d3e",
           "SLURM_JOB_UUID": "8f14e45f-ceea-467f-a0f4-1e5a1b1c2d3e", "NCCL_RAS_TOKEN": "x1"}
    out = redact_env(env)
    assert out["DB_PW"] == out["NEWRELIC_ACCOUNT"] == out["NCCL_RAS_TOKEN"] == MASK
    assert out["NVIDIA_VISIBLE_DEVICES"] == env["NVIDIA_VISIBLE_DEVICES"]
    assert out["SLURM_JOB_UUID"] == env["SLURM_JOB_UUID"]
    walked = redact({"license": "8f14e45f-ceea-467f-a0f4-1e5a1b1c2d3e",
                     "gpu_uuid": "8f14e45f-ceea-467f-a0f4-1e5a1b1c2d3e"})
    assert walked == {"license": MASK, "gpu_uuid": "8f14e45f-ceea-467f-a0f4-1e5a1b1c2d3e"}


def _forms(secret: str) -> list[str]:
    return list({secret, html.escape(secret), json.dumps(secret)[1:-1]})


def test_every_format_is_gone_from_every_report_format(tmp_path: Path) -> None:
    from distdoctor.knowledge import load_knowledge
    from distdoctor.tui.record.report import export_report

    lines = [line for _n, line, _s in PLANTED]
    record = {"schema": 1, "id": "inc-formats", "created": 0, "updated": 0, "host": "node-17",
              "symptom": None, "answers": {}, "events": [
                  {"kind": "logs", "time": 0, "data": {"files_read": 1, "causes": [
                      {"id": "nic-selection", "score": 3, "evidence": [
                          {"file": "r1.log", "line": i, "text": line} for i, line in enumerate(lines, 1)]}]}},
                  {"kind": "check", "time": 0, "data": {"host": "node-17", "findings": [],
                                                          "facts": {"lines": lines}}}]}
    kb = load_knowledge(use_env=False)
    for fmt in ("md", "html", "json"):
        text = export_report(record, kb, fmt)
        for _n, _l, secret in PLANTED:
            for form in _forms(secret):
                assert form not in text, (fmt, form)


SECRET_ENV = {"NCCL_RAS_TOKEN": "rasTokenValue777", "NCCL_IB_HCA": "mlx5_0",
              "TORCH_HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz123456",
              "NCCL_DEBUG_FILE": "/tmp/x.%h?Signature=vjbyPxybdZaNmGa%2ByT272YEAiv4"}


def test_collect_snapshot_is_redacted_with_names_kept(tmp_path: Path) -> None:
    rc, out, err, rss = run("collect", env=SECRET_ENV)
    sane(rc, out, err, rss, codes=(0,))
    doc = json.loads(out)
    assert "rasTokenValue777" not in out and "abcdefghijklmnopqrstuvwxyz123456" not in out
    assert "vjbyPxybdZaNmGa" not in out
    assert "NCCL_RAS_TOKEN" in out and "mlx5_0" in out and doc["end"] == doc["schema"]


def test_check_json_is_redacted(tmp_path: Path) -> None:
    rc, out, err, rss = run("check", "--json", "--only", "switches", env=SECRET_ENV)
    sane(rc, out, err, rss, codes=(0, 1))
    json.loads(out)
    assert "rasTokenValue777" not in out and "abcdefghijklmnopqrstuvwxyz123456" not in out
    assert "NCCL_RAS_TOKEN" in out


def nested(depth: int) -> Any:
    value: Any = {"token": "tok_secret_deep_42"}
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return value


@pytest.mark.parametrize("depth", [900, 5000])
def test_a_report_of_a_session_nested_deep_is_bounded(tmp_path: Path, depth: int) -> None:
    state = tmp_path / "state"
    folder = state / "distdoctor" / "sessions"
    folder.mkdir(parents=True)
    record = {"schema": 1, "id": "deep", "created": 0, "updated": 0, "host": "h", "symptom": None,
              "answers": {}, "events": [{"kind": "check", "time": 0, "data": {"facts": nested(depth)}}]}
    (folder / "deep.json").write_text(_dump_deep(record))
    for fmt, extra in (("md", []), ("json", []), ("html", []), ("md", ["--pseudonymize"]),
                       ("json", ["--no-redact"])):
        rc, out, err, rss = run("report", "deep", "--format", fmt, *extra, env={"XDG_STATE_HOME": str(state)})
        sane(rc, out, err, rss, codes=(0, 2))
        if "--no-redact" not in extra:
            assert "tok_secret_deep_42" not in out


def _dump_deep(record: dict[str, Any]) -> str:
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 100000))
    try:
        return json.dumps(record)
    finally:
        sys.setrecursionlimit(old)
