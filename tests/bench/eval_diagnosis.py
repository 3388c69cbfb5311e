"""Aggregate diagnosis figures over every real and recorded log set: `python tests/bench/eval_diagnosis.py`.

Sets (each case a folder with `label.json`):
- `../shared/fixtures/logs`, `../shared/fixtures/logs-batch2`: real public-thread excerpts;
- `../shared/fixtures/recorded`, `tests/fixtures/recorded`: real faults injected on CPU/Gloo;
- `../shared/fixtures/healthy`, `tests/fixtures/healthy`: healthy runs, which must never fail;
- `tests/fixtures/public` ("public-fresh"): public-thread excerpts gathered for issue 21 and measured
  before any rule change (see its README). Their labels also say whether the paste holds the
  evidence (`evidence_in_paste`) and whether the cause is one of GUIDE.md's (`outside_taxonomy`).

Every case goes through the path `distdoctor logs` takes (the analysis, then the one diagnosis).
For failure cases: top-1 and top-3 (the labelled primary cause first / in the first three; a
case labelled `other` counts its `also` causes) and, where the label names `culprit_rank`, whether
the verdict's culprit names that rank. For healthy cases: a false alarm is a confident answer (likely or
confirmed). Per set, the calibration table: right/total at each confidence level. For cases whose label says the paste lacks the evidence or the cause is
outside the taxonomy, "confidently wrong" is a top cause that is not the labelled one while its basis
is evidence or the report failed; the right answer there is "not enough evidence". Sets whose labels
carry these fields also report top-1/top-3 over the cases with evidence in the paste. The symptom the reporter saw is passed, as the Classify step would.
`--json` prints the figures as JSON; `--cases` lists every case's answer.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
SHARED = HERE.parent.parent / "shared" / "fixtures"
SETS = {
    "logs": SHARED / "logs",
    "logs-batch2": SHARED / "logs-batch2",
    "recorded": SHARED / "recorded",
    "own-recorded": HERE / "fixtures" / "recorded",
    "healthy": SHARED / "healthy",
    "own-healthy": HERE / "fixtures" / "healthy",
    # recorded after the rules they are measured with (tests/fixtures/record_fresh.py): held out
    "fresh-recorded": HERE / "fixtures" / "fresh" / "recorded",
    "fresh-healthy": HERE / "fixtures" / "fresh" / "healthy",
    # gathered from public threads for issue 21, measured before any rule change: held out
    "public-fresh": HERE / "fixtures" / "public",
    # recorded for issue 21 (tests/fixtures/record_fresh2.py), measured before any rule change: held out
    "fresh2-recorded": HERE / "fixtures" / "fresh2" / "recorded",
    "fresh2-healthy": HERE / "fixtures" / "fresh2" / "healthy",
    # a third batch from public threads for issue 21, measured before any rule used it: held out
    "public3": HERE / "fixtures" / "public3",
    # a third recorded batch for issue 21 (tests/fixtures/record_fresh3.py), measured before any rule used it: held out
    "fresh3-recorded": HERE / "fixtures" / "fresh3" / "recorded",
    "fresh3-healthy": HERE / "fixtures" / "fresh3" / "healthy",
    # a fourth batch from public threads for issue 21, measured before any rule used it: held out
    "public4": HERE / "fixtures" / "public4",
    # a fourth recorded batch for issue 21 (tests/fixtures/record_fresh4.py), measured before any rule used it: held out
    "fresh4-recorded": HERE / "fixtures" / "fresh4" / "recorded",
    "fresh4-healthy": HERE / "fixtures" / "fresh4" / "healthy",
    # a fifth batch, public (tests/fixtures/public5) and recorded (record_fresh5.py), measured held out
    # before any rule used it (their BASELINE.md), then used as development data
    "public5": HERE / "fixtures" / "public5",
    "fresh5-recorded": HERE / "fixtures" / "fresh5" / "recorded",
    "fresh5-healthy": HERE / "fixtures" / "fresh5" / "healthy",
    # a sixth recorded batch (record_fresh6.py), measured held out first (its BASELINE.md)
    "fresh6-recorded": HERE / "fixtures" / "fresh6" / "recorded",
    "fresh6-healthy": HERE / "fixtures" / "fresh6" / "healthy",
    # a sixth public batch (tests/fixtures/public6), measured held out first (its BASELINE.md)
    "public6": HERE / "fixtures" / "public6",
}


def cases(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if (p / "label.json").is_file()) if root.is_dir() else []


def inputs(case: Path) -> list[str]:
    logs = case / "logs"
    return [str(logs)] if logs.is_dir() else [str(p) for p in sorted(case.iterdir()) if p.name != "label.json"]


def judge(case: Path, kb) -> dict:
    """One case through the path `distdoctor logs` takes: the analysis, then the one diagnosis."""
    from distdoctor.knowledge.logs import analyse
    from distdoctor.tui.commands.logs import conclude
    label = json.loads((case / "label.json").read_text())
    data, d = conclude(analyse(inputs(case), kb, symptom=label.get("symptom")).to_dict(), kb, label.get("symptom"))
    ids = [c.id for c in d.causes]
    row: dict = {"case": case.name, "got": ids[:3], "confidence": d.confidence}
    verdict = data["verdict"]
    if label.get("healthy"):
        row.update(healthy=True, false_alarm=d.confident)
        return row
    want = {label["primary"]} if label["primary"] != "other" else {"other", *label.get("also", [])}
    row.update(want=sorted(want), top1=bool(ids) and ids[0] in want, top3=bool(want & set(ids[:3])))
    if "evidence_in_paste" in label or "outside_taxonomy" in label:
        unsure = not label.get("evidence_in_paste", True) or bool(label.get("outside_taxonomy"))
        row["evidence_in_paste"] = bool(label.get("evidence_in_paste", True))
        row["unsure"] = unsure
        if unsure:  # the right answer is "not enough evidence", or the right cause
            row["confident_wrong"] = bool(d.confident and not row["top1"])
    if label.get("culprit_rank") is not None:
        culprit = (verdict.get("culprit") or {}).get("ranks") or []
        row["rank_ok"] = [str(label["culprit_rank"])] == [str(r) for r in culprit]
    return row


def figures(rows: list[dict]) -> dict:
    fails = [r for r in rows if not r.get("healthy")]
    healthy = [r for r in rows if r.get("healthy")]
    out: dict = {"cases": len(rows)}
    if fails:
        out.update(top1=sum(r["top1"] for r in fails) / len(fails), top3=sum(r["top3"] for r in fails) / len(fails),
                   failures=len(fails))
        ranked = [r for r in fails if "rank_ok" in r]
        if ranked:
            out["culprit_rank"] = sum(r["rank_ok"] for r in ranked) / len(ranked)
        with_evidence = [r for r in fails if r.get("evidence_in_paste") and not r.get("unsure")]
        if with_evidence:
            out.update(evidence_cases=len(with_evidence),
                       top1_evidence=sum(r["top1"] for r in with_evidence) / len(with_evidence),
                       top3_evidence=sum(r["top3"] for r in with_evidence) / len(with_evidence))
        unsure = [r for r in fails if r.get("unsure")]
        if unsure:
            out.update(unsure_cases=len(unsure), confident_wrong=sum(r["confident_wrong"] for r in unsure))
    if healthy:
        out.update(healthy=len(healthy), false_alarms=sum(r["false_alarm"] for r in healthy))
    # calibration: how often the top cause is right at each confidence level
    out["levels"] = {level: [sum(r["top1"] for r in fails if r["confidence"] == level),
                             sum(1 for r in fails if r["confidence"] == level)]
                     for level in ("confirmed", "likely", "unknown")}
    return out


def run(sets: dict[str, Path] = SETS) -> dict[str, dict]:
    from distdoctor.knowledge import load_knowledge
    kb = load_knowledge(use_env=False)
    result = {}
    for name, root in sets.items():
        rows = [judge(c, kb) for c in cases(root)]
        if rows:
            result[name] = {"figures": figures(rows), "cases": rows}
    return result


def fails_in(f: dict) -> bool:
    return any(n for _, n in f["levels"].values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--cases", action="store_true", help="list every case's answer")
    args = ap.parse_args(argv)
    result = run()
    if args.json:
        print(json.dumps({k: v if args.cases else v["figures"] for k, v in result.items()}, indent=1))
        return 0
    for name, res in result.items():
        f = res["figures"]
        parts = [f"{f['cases']:3d} cases"]
        if "top1" in f:
            parts.append(f"top-1 {f['top1']:.2f}  top-3 {f['top3']:.2f}")
        if "culprit_rank" in f:
            parts.append(f"culprit rank {f['culprit_rank']:.2f}")
        if "healthy" in f:
            parts.append(f"false alarms {f['false_alarms']}/{f['healthy']}")
        if "evidence_cases" in f:
            parts.append(f"evidence in paste ({f['evidence_cases']}): top-1 {f['top1_evidence']:.2f}  "
                         f"top-3 {f['top3_evidence']:.2f}")
        if fails_in(f):
            parts.append("  ".join(f"{lv} {ok}/{n}" for lv, (ok, n) in f["levels"].items() if n))
        if "unsure_cases" in f:
            parts.append(f"no evidence/outside: confidently wrong {f['confident_wrong']}/{f['unsure_cases']}")
        print(f"{name:13s} " + "  ".join(parts))
        if args.cases:
            for r in res["cases"]:
                mark = ("FALSE ALARM" if r["false_alarm"] else "ok") if r.get("healthy") else \
                    ("ok" if r["top1"] else "top3" if r["top3"] else "MISS")
                print(f"    {mark:11s} {r['case']}: want {r.get('want', '-')} got {r['got']}"
                      + (f" rank_ok={r['rank_ok']}" if "rank_ok" in r else "")
                      + f" [{r['confidence']}]"
                      + (f" confidently_wrong={r['confident_wrong']}" if "confident_wrong" in r else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
