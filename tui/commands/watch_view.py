"""What `distdoctor run` and `distdoctor watch` share: their common options, the text view of an
outcome, and the session and report saved with it."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from distdoctor.knowledge.i18n import t

from . import common

# a rank's state in the table (probes/watch/progress.py), as catalogue keys
STATES = (t("training", lang="en"), t("in a collective", lang="en"), t("stuck in a frame", lang="en"),
          t("waiting", lang="en"))


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(t("not a number: {text}", text=repr(text))) from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(t("must be above 0 and at most 3600: {text}", text=repr(text)))
    return value


def add_watch_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stall", type=seconds, metavar="S",
                        help=t("seconds with no rank making progress that confirm a hang (default: half "
                               "the job's heartbeat timeout when it sets one, else 120)"))
    parser.add_argument("--evidence-dir", metavar="DIR",
                        help=t("where the stacks, dumps, logs and report go (default: a new folder under "
                               "distdoctor's state folder, named after the session). For a job over several "
                               "nodes, give every node's watcher the same folder on a shared file system: each "
                               "writes DIR/<host>/, a hang confirmed on any node makes every node capture, and "
                               "the node of the lowest node rank gives the one verdict, DIR/verdict.json"))
    parser.add_argument("--no-native", action="store_true",
                        help=t("skip the native (C/C++) stacks at capture (they take a second per rank)"))
    parser.add_argument("--debug-server", metavar="URL",
                        help=t("the job's PyTorch debug server (start_debug_server), read for every rank's "
                               "stacks and Flight Recorder at capture (default: tried at {url})",
                               url="http://127.0.0.1:25999"))
    common.add_common(parser)


def debug_server(args: argparse.Namespace) -> tuple[str, bool]:
    """(the debug server's address to try, whether the user named it)."""
    from distdoctor.probes.debugserver import DEFAULT_URL

    return (args.debug_server, True) if args.debug_server else (DEFAULT_URL, False)


def evidence_dir(args: argparse.Namespace, session_id: str, shared: Any = None) -> Path:
    """The folder this watcher writes its evidence in: --evidence-dir (DIR/<host>/ on several
    nodes: `shared`), else one under the state folder named after the session."""
    from distdoctor.tui.record.session import state_dir

    path = shared.own if shared is not None else (
        Path(args.evidence_dir) if args.evidence_dir else state_dir().parent / "evidence" / session_id)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        from ..errors import UsageError

        raise UsageError(t("--evidence-dir {path}: cannot write there ({why})", path=path,
                           why=exc.strerror or exc)) from None
    return path


def shared_dir(args: argparse.Namespace, argv: list[str], env: dict[str, str]) -> Any:
    """The agreement between nodes (probes/watch/nodes.py) when --evidence-dir is given and the
    job spans several nodes (torchrun's --nnodes, GROUP_WORLD_SIZE, SLURM_NNODES, WORLD_SIZE over
    LOCAL_WORLD_SIZE); None otherwise. Its folder for this node is DIR/<host>/."""
    if not args.evidence_dir:
        return None
    from distdoctor.probes.stacks import hostname
    from distdoctor.probes.watch.nodes import SharedDir, job_nodes

    node, count, key = job_nodes(argv, env)
    if not count or count < 2:
        return None
    shared = SharedDir(Path(args.evidence_dir), hostname(), node_rank=node, nnodes=count, run=key)
    say(t("node {node} of {count}: the watchers agree through {dir} (the verdict: {dir}/verdict.json, "
          "given by the lowest node rank)", node="?" if node is None else node, count=count, dir=args.evidence_dir))
    return shared


def say(text: str) -> None:
    """A progress line of distdoctor's own, on stderr (stdout carries the job or the JSON)."""
    print(t("distdoctor: {text}", text=text), file=sys.stderr, flush=True)


def save(args: argparse.Namespace, outcome: Any, session_id: str, kind: str) -> None:
    """The outcome, with the logs, stacks, Flight Recorder and RAS it rests on, as a session
    (the app resumes it, `distdoctor report` exports it) and a Markdown report in the evidence
    folder. A failure to save is a note, never the outcome's loss."""
    from distdoctor.tui.record.session import SessionError, SessionStore

    capture = outcome.capture or {}
    symptom = {"hang": "hang", "failed": "error"}.get(outcome.outcome)
    data = {**outcome.to_json(), "ranks": [r.to_dict() for r in outcome.rows], "notes": outcome.notes,
            "command": kind, "watcher_cpu_s": outcome.watcher_cpu_s, "watched_s": outcome.watched_s}
    try:  # the whole outcome beside the evidence, whatever happens to the session
        import json

        (Path(args.evidence_path) / "watch.json").write_text(json.dumps(data, indent=1, default=str),
                                                             encoding="utf-8")
    except OSError as exc:
        common._NOTES.append(t("distdoctor: the report was not written: {why}", why=exc))
    try:
        store = SessionStore()
        if args.session:
            store.append(args.session, kind, data)
            session_id = args.session
        else:
            store.create(session_id, symptom=symptom, events=[])
            store.append(session_id, kind, data)
        for event in ("logs_report", "stacks", "fr", "ras"):
            doc = capture.get(event)
            if isinstance(doc, dict):
                store.append(session_id, "logs" if event == "logs_report" else event, doc)
        outcome.session = session_id
        record = store.load(session_id)
    except (SessionError, OSError) as exc:
        common._NOTES.append(t("distdoctor: the outcome was not saved as a session: {why}", why=exc))
        return
    try:
        from distdoctor.tui.record.report import export_report

        path = Path(args.evidence_path) / "report.md"
        export_report(record, common.knowledge(args), "md", path)
        outcome.evidence["report"] = str(path)
    except (OSError, ValueError) as exc:
        common._NOTES.append(t("distdoctor: the report was not written: {why}", why=exc))


def render(outcome: Any) -> str:
    """The outcome as text: what happened, the culprit, the causes, the ranks, the evidence."""
    lines = []
    head = {"finished": t("finished (exit code {code})", code=outcome.exit_code),
            "failed": t("failed (exit code {code})", code=outcome.exit_code),
            "hang": t("hang confirmed after {seconds}s without progress", seconds=(outcome.hang or {}).get(
                "detected_after_s"))}[outcome.outcome]
    lines.append(t("outcome: {what}", what=head))
    culprit = (outcome.verdict or {}).get("culprit")
    if culprit and culprit.get("host"):  # several nodes: the node too
        lines.append(t("culprit: rank {ranks} on {host} ({role}): {why}", ranks=", ".join(culprit.get("ranks") or []),
                       host=culprit["host"], role=t(str(culprit.get("role") or "")), why=culprit.get("why", "")))
    elif culprit:
        lines.append(t("culprit: rank {ranks} ({role}): {why}", ranks=", ".join(culprit.get("ranks") or []),
                       role=t(str(culprit.get("role") or "")), why=culprit.get("why", "")))
    elif outcome.outcome != "finished":
        lines.append(t("culprit: none named by the evidence"))
    if (outcome.verdict or {}).get("confidence"):
        lines.append(t("confidence: {level}", level=t(outcome.verdict["confidence"])))
    summary = (outcome.verdict or {}).get("summary")
    if summary:
        lines.append(t("summary: {text}", text=summary))
    # the priors ("the symptom points here") are in --json; the text lists what the evidence says
    for n, cause in enumerate([c for c in outcome.causes if c.get("basis") != "prior"][:3], 1):
        lines.append(f"  {n}. {cause['id']}  ({t(cause.get('basis', 'evidence'))}, {cause['score']:g})")
    for s in outcome.stragglers:
        slow = t("{x}x slower", x=s["slowdown"]) if s.get("slowdown") else t("the others waited on it in every sample")
        lines.append(t("straggler: rank {rank} ({slow})", rank=s["rank"], slow=slow))
    if outcome.rows:
        lines.append("")
        lines.append(t("rank  pid       state             since progress  CPU    where"))
        for r in outcome.rows:
            where = (t("exit code {code}", code=r.exit_code) if r.state in ("dead", "exited")
                     else r.where or r.last_collective)
            lines.append(f"{r.rank:<5} {r.pid!s:<9} {t(r.state):<17} {r.since_progress_s:>10.0f} s  "
                         f"{r.cpu_pct:>4.0f}%  {where}")
    if outcome.evidence:
        lines.append("")
        lines.append(t("evidence:"))
        for key, value in outcome.evidence.items():
            shown = value if isinstance(value, str) else t("{n} files", n=len(value))
            lines.append(f"  {key}: {shown}")
    if outcome.session:
        lines.append(t("session: {id} (distdoctor --resume {id}; distdoctor report {id})", id=outcome.session))
    for note in outcome.notes:
        lines.append(t("note: {text}", text=note))
    return "\n".join(lines) + "\n"


def finish(args: argparse.Namespace, outcome: Any, session_id: str, kind: str) -> int:
    """Save the session and report, print the outcome (JSON or text), and the exit code."""
    save(args, outcome, session_id, kind)
    if args.json:
        common.print_json(outcome.to_json())
    else:
        sys.stdout.write(render(outcome))
    return exit_code(outcome)


def exit_code(outcome: Any) -> int:
    return 0 if outcome.outcome == "finished" else 1


def stamp() -> str:
    return time.strftime("%H:%M:%S")


def port_free(port: int) -> bool:
    from distdoctor.probes.repro.proctree import port_is_free

    return port_is_free(port)


def master_port(argv: list[str], env: dict[str, str] | None = None) -> int | None:
    """The rendezvous port a launch line uses (torchrun's --master-port, --rdzv-endpoint, or
    MASTER_PORT; 29500 for a standalone torchrun without one)."""
    from distdoctor.probes.watch.launch import option_value

    env = env if env is not None else dict(os.environ)
    port = option_value(argv, "--master-port", "--master_port")
    if port and port.isdigit():
        return int(port)
    endpoint = option_value(argv, "--rdzv-endpoint", "--rdzv_endpoint")
    if endpoint and endpoint.rpartition(":")[2].isdigit():
        return int(endpoint.rpartition(":")[2])
    if env.get("MASTER_PORT", "").isdigit():
        return int(env["MASTER_PORT"])
    return None
