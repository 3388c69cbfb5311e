"""`distdoctor drill`: practise on real faults: a small job with one fault, run for real."""
from __future__ import annotations

import argparse
import re
import shlex
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from distdoctor.knowledge import i18n
from distdoctor.knowledge.i18n import t

from ..errors import UsageError
from . import common

KIND = "drill"
DESCRIPTION = """\
Onboarding drills. Each drill writes a small training job (three linear layers,
synthetic data, Gloo, CPU only, 2 to 4 ranks) with one real fault injected, runs
it with torchrun (or the launcher the fault needs) from the target interpreter
under short timeouts, and keeps every rank's logs the way a real job would
(torchrun --log-dir ... --redirects 3 --tee 3, and the console). Then diagnose
it as on call: `distdoctor --drill NAME` in the app, or `distdoctor logs DIR/logs`.

Every drill ends within 90 s, leaves no process behind and frees its port.
--record DIR keeps the logs, the job (repro/) and the answer (label.json) as a
fixture in the layout of the project's recorded incidents."""
EPILOG = """\
examples:
  distdoctor drill list                         the drills, and the ones you passed
  distdoctor drill run crash                    run one; prints where its logs are
  distdoctor drill run straggler --nproc 4 --json
  distdoctor drill run same-data --python /opt/job-env/bin/python
  distdoctor drill run crash --healthy          the same job without its fault
  distdoctor drill run port-in-use --record tests/fixtures/recorded/07-drill-port-in-use

exit codes: 0 the drill ran and its fault showed in the logs (list: always 0);
            1 the fault did not show, or a process or the port was left behind;
            2 bad usage (unknown drill, bad --nproc, a folder that is not empty)
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("drill", help=t("practise: run a small job with one real fault"),
                            description=t(DESCRIPTION), epilog=t(EPILOG),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="drill_action", metavar="ACTION")
    listing = actions.add_parser("list", help=t("the drills and which ones you passed"),
                                 description=t("The drills: the fault each injects, the cause to "
                                             "find, and whether you passed it in the app."),
                                 epilog=t("exit codes: 0 always; 2 bad usage\n"),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_common(listing, session=False)
    listing.set_defaults(func=run_list)
    run = actions.add_parser("run", help=t("run one drill for real and keep its logs"),
                             description=t(DESCRIPTION), epilog=t(EPILOG),
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("name", metavar="NAME", help=t("the drill (see `distdoctor drill list`)"))
    run.add_argument("--nproc", type=int, metavar="N",
                     help=t("ranks, 2 to 4 (default: the drill's own, 2 or 3)"))
    run.add_argument("--python", metavar="PATH",
                     help=t("the interpreter whose torch runs the job (default: this one)"))
    run.add_argument("--timeout", type=float, default=75.0, metavar="S",
                     help=t("kill the job after S seconds (default 75, at most 85)"))
    run.add_argument("--record", metavar="DIR",
                     help=t("keep logs/, repro/ and label.json here, machine paths neutralised "
                          "(an empty or new folder)"))
    run.add_argument("--healthy", action="store_true",
                     help=t("run the same job without its fault, for comparison"))
    common.add_common(run)
    run.set_defaults(func=run_drill_command)
    parser.set_defaults(func=_no_action)


def _no_action(args: argparse.Namespace) -> int:
    raise UsageError(t("drill: say `list` or `run NAME` (see distdoctor drill --help)"))


def run_list(args: argparse.Namespace) -> int:
    from distdoctor.probes.drill import DRILLS
    from distdoctor.probes.drill.store import passed

    done = passed()
    rows = [{"name": d.name, "cause": d.cause, "rank": d.culprit is not None,
             "injects": d.summary, "nproc": d.nproc, "passed": d.name in done,
             "score": done.get(d.name, {}).get("score")} for d in DRILLS.values()]
    if args.json:
        common.print_json({"drills": rows})
        return 0
    head = (t("drill"), t("passed"), t("what is injected"))
    width = max([i18n.cells(head[0])] + [len(r["name"]) for r in rows])
    mark_w = max(6, i18n.cells(head[1]))
    out = [f"{i18n.pad(head[0], width)}  {i18n.pad(head[1], mark_w)}  {head[2]}"]
    for r in rows:
        mark = t("yes") if r["passed"] else "-"
        out.append(f"{r['name']:<{width}}  {i18n.pad(mark, mark_w)}  {t(r['injects'])}")
    out.append("")
    out.append(t("run one:   {command}", command="distdoctor drill run crash"))
    out.append(t("in the app: {command}", command="distdoctor --drill crash"))
    print("\n".join(out))
    return 0


def run_drill_command(args: argparse.Namespace) -> int:
    from distdoctor.probes.drill import check_request

    check_request(args.name, args.nproc, args.timeout)
    if args.record:
        target = Path(args.record)
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise UsageError(t("--record {path}: not an empty folder", path=args.record))
    if not args.json:
        line = (t("drill {name}: running the job with its healthy twin (at most {seconds} s)...", name=args.name,
                  seconds=f"{args.timeout:.0f}") if args.healthy else
                t("drill {name}: running the job with the fault (at most {seconds} s)...", name=args.name,
                  seconds=f"{args.timeout:.0f}"))
        print(line, file=sys.stderr, flush=True)
    live = DrillLive(enabled=not args.json or sys.stderr.isatty())
    with live:
        live.begin(args.name)
        result = _run_guarded(args, live.line)
    data = result.to_dict()
    common.record(args, KIND, data)
    if args.json:
        common.print_json(data)
    else:
        print(_text(result, args))
    return 0 if result.reproduced and result.clean else 1


def _drill_live() -> type:
    """Live progress for a drill: each rank's phase (started, data, epoch/step, done) as it
    happens, on the same clock and status line `repro` shows (repro_view.Live)."""
    from .repro_view import Live

    class _DrillLive(Live):  # type: ignore[misc, valid-type]
        def line(self, text: str, label: str | None = None) -> None:
            for rank, phase in drill_phases(text):
                with self._lock:
                    changed = self.ranks.get(rank) != phase
                    self.ranks[rank] = phase
                    said = getattr(self, "said", {})
                    self.said = said
                    now = time.monotonic()
                    # every phase; a step at most every STEP_EVERY_S per rank (a step a second would flood)
                    due = changed and (not phase.startswith(STEP_WORD) or now - said.get(rank, 0.0) >= STEP_EVERY_S)
                    if due:
                        said[rank] = now
                if due:
                    self.say(f"{self.label}: rank {rank} {phase}")
            # no error lines, unlike repro: finding the fault in the logs is the exercise

    return _DrillLive


STEP_WORD = "step "
STEP_EVERY_S = 5.0
_PHASE = re.compile(r"\[rank(\d+)\] (?:(rank=)|(\d+) samples|epoch (\d+) step (\d+)/(\d+)|epoch (\d+) done|"
                    r"(training complete)|(saved)|(resumed))")


def drill_phases(text: str) -> list[tuple[int, str]]:
    """(rank, phase) for each progress line of the drill job in `text`."""
    out = []
    for m in _PHASE.finditer(text):
        rank = int(m.group(1))
        if m.group(2):
            phase = t("started")
        elif m.group(3):
            phase = t("data loaded")
        elif m.group(4):
            phase = f"{STEP_WORD}{m.group(5)}/{m.group(6)} " + t("(epoch {epoch})", epoch=m.group(4))
        elif m.group(7):
            phase = t("epoch {epoch} done", epoch=m.group(7))
        elif m.group(8):
            phase = t("finished")
        elif m.group(9):
            phase = t("checkpoint saved")
        else:
            phase = t("resumed from a checkpoint")
        out.append((rank, phase))
    return out


def DrillLive(enabled: bool = True) -> Any:  # noqa: N802 - built lazily: repro_view imports the probes
    return _drill_live()(enabled=enabled)


def _run_guarded(args: argparse.Namespace, on_line: Any = None) -> Any:
    """Run in a worker thread; SIGINT/SIGTERM/SIGHUP only set the cancel flag, so the job's
    tree is still killed and checked gone before distdoctor exits."""
    from distdoctor.probes.drill import DrillError, run_drill

    cancel = threading.Event()
    done = threading.Event()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = run_drill(args.name, nproc=args.nproc, python=args.python or "",
                                      run_dir=Path(args.record) if args.record else None,
                                      timeout=args.timeout, record=bool(args.record),
                                      fault=not args.healthy, cancel=cancel, on_line=on_line)
        except BaseException as exc:  # re-raised in the main thread
            box["error"] = exc
        finally:
            done.set()

    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    main = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, lambda *_: cancel.set()) for s in sigs} if main else {}
    try:
        threading.Thread(target=work, name="drill-run", daemon=True).start()
        while not done.wait(0.2):
            pass  # short waits: the main thread must wake to run signal handlers
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if isinstance(box.get("error"), DrillError):
        raise UsageError(str(box["error"])) from None
    if "error" in box:
        raise box["error"]
    return box["result"]


def _text(result: Any, args: argparse.Namespace) -> str:
    logs = str(Path(result.dir) / "logs")
    lines = [t("drill {name}: the job ended with {outcome} after {seconds} s (exit code {code})", name=args.name,
               outcome=t(result.outcome), seconds=f"{result.wall_s:.1f}", code=result.exit_code)]
    if result.outcome == "stopped":
        lines.append(t("stopped by a signal: the job's processes were killed"))
    elif not result.reproduced:
        lines.append(t("the fault did NOT show in the logs: this run is no use as a drill; "
                       "run it again (a loaded machine can shift timings)"))
    if result.survivors:
        lines.append(t("left behind: pids {pids}", pids=" ".join(map(str, result.survivors))))
    if not result.port_free:
        lines.append(t("port {port} is still bound", port=result.port))
    lines.append(t("logs:     {path}", path=logs))
    lines.append(t("job:      {path} (train.py, cmd.sh)", path=Path(result.dir) / "repro"))
    if not args.healthy:
        lines.append(t("answer:   {path} (no peeking)", path=Path(result.dir) / "label.json"))
        lines.append(t("diagnose it:"))
        lines.append(f"  distdoctor logs {shlex.quote(logs)}")
        lines.append(f"  distdoctor --drill {args.name}")
    return "\n".join(lines)
