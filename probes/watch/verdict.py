"""From the captured evidence to the verdict: the culprit (which rank, in what role, why) and the
ranked causes, through the one diagnosis (knowledge/diagnosis.py). Everything goes through
conclude(), so the engine behind it is called in one place."""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distdoctor.knowledge.i18n import t


def conclude(capture: Mapping[str, Any], kb: Any = None) -> dict[str, Any]:
    """{"culprit", "summary", "confidence", "causes", "logs", "diagnosis"} for a capture:
    {"kind": hang|failed|finished, "logs": [paths], "stacks", "fr", "ras": documents or None,
    "extra": [evidence items the watcher saw itself], "backend": str or None}."""
    from distdoctor.knowledge import load_knowledge
    from distdoctor.knowledge.diagnosis import IncidentEvidence, diagnose
    from distdoctor.knowledge.logs import analyse

    kb = kb or load_knowledge()
    symptom = "hang" if capture.get("kind") == "hang" else "error"
    logs: dict[str, Any] | None = None
    paths = list(capture.get("logs") or [])
    if paths:
        report = analyse(paths, kb, symptom=symptom)
        if report.files_read:
            logs = report.to_dict()
    live: list[dict[str, Any]] = list(capture.get("extra") or [])
    for source in ("stacks", "fr", "ras"):
        doc = capture.get(source)
        if isinstance(doc, Mapping):
            live.extend(dict(x) for x in doc.get("evidence") or [] if isinstance(x, Mapping))
    found = diagnose(kb, IncidentEvidence(symptom=symptom, logs=logs, live=tuple(live),
                                          backend=capture.get("backend")))
    who = dict(found.culprit) if found.culprit else None
    summary = found.summary or (capture.get("stacks") or {}).get("summary") or ""
    if who and not summary:
        summary = t("rank {ranks} ({role}): {why}", ranks=", ".join(who["ranks"]), role=t(who["role"]),
                    why=who.get("why", ""))
    data = found.to_dict()
    return {"culprit": who, "summary": summary, "confidence": found.confidence,
            "causes": data["causes"][:5], "logs": logs, "diagnosis": data}


def culprit_hosts(culprit: dict[str, Any] | None, hosts: Mapping[str, str]) -> dict[str, Any] | None:
    """The culprit with the node its ranks ran on (`host`: one name, or several comma-joined)."""
    if not culprit:
        return culprit
    on = sorted({hosts[r] for r in culprit.get("ranks") or [] if hosts.get(r)})
    return dict(culprit, host=", ".join(on)) if on else culprit


def merge_nodes(captures: Mapping[str, Mapping[str, Any]], work: Path, notes: list[str]) -> dict[str, Any]:
    """Every node's capture (DIR/<host>/captured.json) as one capture for conclude(): their
    stacks analysed together (the odd rank is found across nodes), their evidence items, Flight
    Recorder dumps and RAS, and their per-rank logs linked under `work` by global rank (torchrun
    names each node's files by local rank). A node's shared output is read only where its local
    ranks are its global ones (its `[default0]:` prefixes name local ranks). Ranks numbered on each
    node (no RANK in their environment: mp.spawn's children) are named `rank@host`, never taken
    for one another."""
    from .. import stacks
    from ..flightrec import DumpError, as_evidence, read_and_analyse, to_json
    from .mechanisms import different_collectives
    from .nodes import read_json, write_json

    docs, extra, fr_dirs, logs = [], [], [], []
    ras = None
    kinds = set()
    hosts: dict[str, str] = {}
    links = work / "logs-by-rank"
    on: dict[str, set[str]] = {}
    for host, cap in captures.items():
        for rank in cap.get("local_ranks") or {}:
            on.setdefault(str(rank), set()).add(host)
    clash = sorted(r for r, where in on.items() if len(where) > 1)
    if clash:
        notes.append(t("ranks {ranks} are numbered on each node (no RANK in their environment): each is "
                       "named rank@host", ranks=", ".join(clash)))
    for host, cap in sorted(captures.items()):
        def named(rank: Any, host: str = host) -> str:
            return f"{rank}@{host}" if str(rank) in clash else str(rank)
        kinds.add(cap.get("kind"))
        doc = read_json(Path(str(cap["stacks"]))) if cap.get("stacks") else None
        if doc is not None:
            for r in doc.get("ranks") or []:
                r["rank"] = named(r.get("rank"))
            docs.append(doc)
            hosts.update({r["rank"]: host for r in doc.get("ranks") or []})
        hosts.update({named(r): host for r in cap.get("local_ranks") or {}})
        extra.extend(dict(x, ranks=[named(r) for r in x.get("ranks") or []])
                     for x in cap.get("extra") or [] if isinstance(x, Mapping))
        fr_dirs.extend(d for d in cap.get("fr") or [] if isinstance(d, str) and os.path.isdir(d) and os.listdir(d))
        if ras is None and cap.get("ras"):
            ras = read_json(Path(str(cap["ras"])))
        local = cap.get("local_ranks") or {}
        if all(str(r) == str(lr) and str(r) not in clash for r, lr in local.items()):
            logs.extend(p for p in cap.get("shared_logs") or [] if os.path.isfile(p))
        elif cap.get("shared_logs"):
            notes.append(t("{host}'s launcher output was not read: its lines name local ranks", host=host))
        for rank, paths in (cap.get("logs") or {}).items():
            for path in paths if named(rank).isdigit() else []:
                link = links / f"rank{rank}-{os.path.basename(path)}"
                try:
                    links.mkdir(parents=True, exist_ok=True)
                    if link.is_symlink():
                        link.unlink()
                    link.symlink_to(os.path.abspath(path))
                    logs.append(str(link))
                except OSError as exc:
                    notes.append(t("logs: {path}: {why}", path=path, why=exc.strerror or exc))
    merged: dict[str, Any] = {"kind": "failed" if "failed" in kinds else "hang", "extra": extra, "logs": logs,
                              "hosts": hosts, "paths": {}}
    if docs:
        merged["stacks"] = stacks.merge_hosts(docs)
        merged["stacks"]["evidence"] = stacks.as_evidence(merged["stacks"])
        merged["extra"] = extra + different_collectives(merged["stacks"])
        path = work / "stacks-all-nodes.json"
        if write_json(path, merged["stacks"]):
            merged["paths"]["stacks"] = str(path)
    if fr_dirs:
        try:
            result = read_and_analyse(fr_dirs)
            if result.dumps:
                merged["fr"] = {**to_json(result), "evidence": as_evidence(result)}
        except DumpError as exc:
            notes.append(t("Flight Recorder: {why}", why=exc))
    merged["ras"] = ras
    return merged


def agree(shared: Any, own: dict[str, Any], kb: Any, *, backend: str | None, wait_s: float,
          notes: list[str]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """This node's part in the one verdict of a multi-node job (probes/watch/nodes.py): its capture
    is written and every node's awaited; the leader concludes over them all and publishes
    DIR/verdict.json, the others read it (and give it themselves when the leader never does).
    (the verdict document, the merged capture when this node concluded)."""
    from .nodes import VERDICT

    shared.captured(own)
    captures, missing = shared.wait_captures(wait_s)
    if missing:
        notes.append(t("no capture from {nodes} within {seconds}s: the verdict rests on the other nodes",
                       nodes=", ".join(missing), seconds=f"{wait_s:g}"))
    leader = shared.leader()
    if leader != shared.host:
        found = shared.wait_verdict(wait_s)
        if found is not None:
            notes.append(t("the verdict was given by {host}: {path}", host=found.get("by"), path=shared.root / VERDICT))
            return found, None
        notes.append(t("{host}, which gives the verdict, gave none within {seconds}s: it is given here",
                       host=leader, seconds=f"{wait_s:g}"))
    merged = merge_nodes(captures, shared.own, notes)
    concluded = conclude(dict(merged, backend=backend), kb)
    merged["logs_report"] = concluded["logs"]
    doc = {"outcome": merged["kind"], "causes": concluded["causes"], "nodes": sorted(captures), "missing": missing,
           "verdict": {"culprit": culprit_hosts(concluded["culprit"], merged["hosts"]),
                       "summary": concluded["summary"], "confidence": concluded["confidence"]},
           "last_progress": shared.last_progress(), "stacks": merged["paths"].get("stacks")}
    if shared.publish(doc):
        notes.append(t("the verdict over every node: {path}", path=shared.root / VERDICT))
    return shared.verdict() or doc, merged
