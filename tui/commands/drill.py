"""`distdoctor drill`: practise on real faults: a small job with one fault, run for real."""
from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Any

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
    raise UsageError("drill: say `list` or `run NAME` (see distdoctor drill --help)")


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
    width = max(len(r["name"]) for r in rows)
    out = [f"{'drill':<{width}}  passed  what is injected"]
    for r in rows:
        mark = "yes" if r["passed"] else "-"
        out.append(f"{r['name']:<{width}}  {mark:<6}  {r['injects']}")
    out.append("")
    out.append("run one:   distdoctor drill run crash")
    out.append("in the app: distdoctor --drill crash")
    print("\n".join(out))
    return 0


def run_drill_command(args: argparse.Namespace) -> int:
    from distdoctor.probes.drill import DrillError, check_request

    try:
        check_request(args.name, args.nproc, args.timeout)
    except DrillError as exc:
        raise UsageError(str(exc)) from None
    if args.record:
        target = Path(args.record)
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise UsageError(f"--record {args.record}: not an empty folder")
    if not args.json:
        what = "its healthy twin" if args.healthy else "the fault"
        print(f"drill {args.name}: running the job with {what} (at most {args.timeout:.0f} s)...",
              file=sys.stderr, flush=True)
    result = _run_guarded(args)
    data = result.to_dict()
    common.record(args, KIND, data)
    if args.json:
        common.print_json(data)
    else:
        print(_text(result, args))
    return 0 if result.reproduced and result.clean else 1


def _run_guarded(args: argparse.Namespace) -> Any:
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
                                      fault=not args.healthy, cancel=cancel)
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
    lines = [f"drill {args.name}: the job ended with {result.outcome} after {result.wall_s:.1f} s "
             f"(exit code {result.exit_code})"]
    if result.outcome == "stopped":
        lines.append("stopped by a signal: the job's processes were killed")
    elif not result.reproduced:
        lines.append("the fault did NOT show in the logs: this run is no use as a drill; "
                     "run it again (a loaded machine can shift timings)")
    if result.survivors:
        lines.append(f"left behind: pids {' '.join(map(str, result.survivors))}")
    if not result.port_free:
        lines.append(f"port {result.port} is still bound")
    lines.append(f"logs:     {logs}")
    lines.append(f"job:      {Path(result.dir) / 'repro'} (train.py, cmd.sh)")
    if not args.healthy:
        lines.append(f"answer:   {Path(result.dir) / 'label.json'} (no peeking)")
        lines.append("diagnose it:")
        lines.append(f"  distdoctor logs {shlex.quote(logs)}")
        lines.append(f"  distdoctor --drill {args.name}")
    return "\n".join(lines)
