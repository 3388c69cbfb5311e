"""`distdoctor repro` and `distdoctor bisect`: the minimal job, then one switch at a time."""
from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from distdoctor.knowledge.i18n import t
from distdoctor.probes.secret_names import is_secret_name

from ..errors import UsageError
from .common import add_common, knowledge, print_json, record
from .exitcodes import problem_if

REPRO_EPILOG = """\
examples:
  distdoctor repro                         two ranks, nccl if CUDA else gloo
  distdoctor repro --python /opt/job-env/bin/python
                                           with the failing job's interpreter
  distdoctor repro --backend gloo --timeout 30 --env GLOO_SOCKET_IFNAME=eth0
  distdoctor repro --json --session 20261129-101500-ab12

limits: --nproc at most one per GPU (nccl) or 4 per CPU core (gloo);
        --timeout above 0 and at most a week.

exit codes: 0 the repro passed, 1 it failed (error or hang),
            2 bad input (no torch there, bad --env, unwritable --run-dir, ...),
            130/143/129 stopped by Ctrl-C, SIGTERM or a closed terminal (SIGHUP): the
            run's processes are killed and checked gone first, its port freed
"""
REPRO_DESCRIPTION = """\
Minimal repro: the smallest job that still fails. Runs a small self-contained
job for real with the failing job's Python (its torchrun): init with an
explicit timeout, a self-check of every rank, a barrier, an all-reduce whose
sum is checked, a broadcast, a clean shutdown. NCCL_DEBUG=INFO and
TORCH_DISTRIBUTED_DEBUG=DETAIL are set so every run leaves evidence; each run's
output is kept on disk. A hang or an error kills the whole process tree. The
script's path and the commands to run it by hand on two nodes are printed
(--show-script prints the script too)."""

BISECT_EPILOG = """\
examples:
  distdoctor bisect
  distdoctor bisect --python /opt/job-env/bin/python \\
      --env NCCL_SOCKET_IFNAME=docker0
  distdoctor bisect --switch p2p-disable --switch NCCL_SOCKET_IFNAME=eth0
  distdoctor bisect --backend gloo --env GLOO_SOCKET_IFNAME=eth9 --json

exit codes: 0 the baseline passes (nothing to bisect); 1 the baseline failed
            (a problem found), whether a switch then fixed it or none helped;
            2 bad input; 130/143/129 stopped by Ctrl-C, SIGTERM or SIGHUP (the
            running job is killed and checked gone first).
"""
BISECT_DESCRIPTION = """\
One-switch bisection on the minimal repro: a baseline run, then each switch
alone (never two at once) in the knowledge base's order: NCCL_IB_DISABLE=1,
NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1, NCCL_SOCKET_IFNAME=<each interface>
(GLOO_SOCKET_IFNAME=<each interface> for gloo). Switches apply on top of the
job's environment (--env, or the current one). The verdict names the switch
that turns a failing baseline into a pass, the cause it implicates and the
permanent fix; remove the switch once that is fixed."""


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nproc", type=int, default=2, metavar="N",
                        help=t("processes (ranks) on this node (default 2)"))
    parser.add_argument("--nnodes", type=int, default=1, metavar="N",
                        help=t("must be 1: one node runs here (the commands to run the same "
                             "script on two nodes by hand are always printed)"))
    parser.add_argument("--backend", choices=("nccl", "gloo", "auto"), default="auto",
                        help=t("auto: nccl when the target torch sees CUDA, else gloo"))
    parser.add_argument("--python", metavar="PATH",
                        help=t("the failing job's interpreter (default: python3 on PATH)"))
    parser.add_argument("--timeout", type=float, default=60.0, metavar="S",
                        help=t("seconds before a run counts as a hang (default 60)"))
    parser.add_argument("--env", action="append", default=[], metavar="K=V",
                        help=t("add to the job's environment (repeatable)"))
    parser.add_argument("--run-dir", metavar="DIR",
                        help=t("keep the runs here (default: $XDG_STATE_HOME/distdoctor/runs/ID)"))
    add_common(parser)


def register(sub: argparse._SubParsersAction) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    repro = sub.add_parser("repro", help=t("run a minimal all-reduce job for real"),
                           description=t(REPRO_DESCRIPTION),
                           epilog=t(REPRO_EPILOG), formatter_class=fmt)
    _options(repro)
    repro.add_argument("--show-script", action="store_true",
                       help=t("print the generated script after the verdict (its path is always printed)"))
    repro.set_defaults(func=run)
    bisect = sub.add_parser("bisect", help=t("one switch at a time until the repro passes"),
                            description=t(BISECT_DESCRIPTION),
                            epilog=t(BISECT_EPILOG), formatter_class=fmt)
    _options(bisect)
    bisect.add_argument("--switch", action="extend", nargs="+", default=[], metavar="NAME",
                        help=t("only these switches (id or variable, optionally =VALUE)"))
    bisect.add_argument("--all", action="store_true",
                        help=t("keep going after a verdict or a passing baseline"))
    from .bisect_nodes import add_arguments as add_node_arguments

    add_node_arguments(bisect)
    bisect.set_defaults(func=run_bisect_command)


def _prepare(args: argparse.Namespace, kb: Any) -> tuple[Any, Any]:
    """(options, python info); every input problem becomes a UsageError."""
    from distdoctor.probes.repro import ReproOptions, check_python, parse_env

    from ..record.session import SessionError, SessionStore

    if getattr(args, "session", None):
        store = SessionStore()
        store.path(args.session)  # a bad id is bad usage: nothing has run yet
        try:
            store.check_appendable(args.session)  # now, not after minutes of runs
        except SessionError as exc:
            # the run is still worth doing: its result is printed, only the saving is lost
            print(t("distdoctor: warning: {error}: the result will be printed, not saved", error=exc),
                  file=sys.stderr)
    opts = ReproOptions(nproc=args.nproc, nnodes=args.nnodes, backend=args.backend,
                        python=args.python or "", timeout=args.timeout,
                        env=parse_env(args.env),
                        run_dir=Path(args.run_dir) if args.run_dir else None)
    info = check_python(opts)
    if opts.run_dir is not None:
        try:  # now, not after the first run has been set up
            opts.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(t("--run-dir {path}: cannot create it ({why})", path=opts.run_dir,
                               why=exc.strerror or exc)) from None
        if any(opts.run_dir.iterdir()):  # the earlier run's log would be overwritten unseen
            print(t("distdoctor: --run-dir {path} is not empty: its earlier run's files are replaced",
                    path=opts.run_dir), file=sys.stderr)
    return replace(opts, python=info.python, torch=info.torch), info


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP while nothing of the run is started yet: unwinds like Ctrl-C,
    so every cleanup on the way (the interpreter check's process group) runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum: int, frame: Any) -> None:
    raise Stopped(signum)


@contextmanager
def _stop_signals() -> Iterator[None]:
    """While the command runs: SIGINT, SIGTERM and SIGHUP (a closed terminal) raise Stopped
    instead of killing distdoctor on the spot with the run's processes left behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, _raise_stopped) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _guarded(work: Callable[[threading.Event], Any]) -> tuple[Any, int]:
    """_in_thread, with an input problem found once the run starts (an unwritable run folder)
    reported as a one-line error."""

    return _in_thread(work)


def _in_thread(work: Callable[[threading.Event], Any]) -> tuple[Any, int]:
    """Run `work(cancel)` in a thread; SIGINT, SIGTERM or SIGHUP set `cancel`, and the run
    kills its own tree, checks it gone and returns. Returns (result, the signal number or 0).

    The handlers only set flags (never raise), and the main thread waits on an Event, not on
    Thread.join(): on Python 3.11 a signal that interrupts join() can mark a thread that still
    runs as finished, and the result was then read before it existed."""
    cancel = threading.Event()
    done = threading.Event()
    box: dict[str, Any] = {}
    got: list[int] = []

    def target() -> None:
        try:
            box["result"] = work(cancel)
        except BaseException as exc:  # handed to the main thread and re-raised there
            box["error"] = exc
        finally:
            done.set()

    def flag(signum: int, frame: Any) -> None:
        got.append(signum)
        cancel.set()

    main = threading.current_thread() is threading.main_thread()
    old = {sig: signal.signal(sig, flag) for sig in STOP_SIGNALS} if main else {}
    try:
        thread = threading.Thread(target=target, name="repro-run")
        thread.start()
        while not done.wait(0.2):
            pass  # short waits: the main thread must wake to run the signal handlers above
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if "error" in box:
        raise box["error"]
    return box["result"], (got[0] if got else 0)


def _say(line: str) -> None:
    """One line on stderr, even where the terminal is gone (SIGHUP): never a traceback."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # stderr closed with the terminal (SIGHUP): the exit code still says it


def _stopped_line(signum: int, results: list[Any]) -> str:
    """What a stop left: the run's processes gone (checked) and its port free, or what not."""
    name = signal.Signals(signum).name
    survivors = sorted({pid for r in results for pid in r.survivors})
    last = results[-1] if results else None
    if last is None:
        return t("distdoctor: stopped by {signal} before the run started; nothing left running", signal=name)
    port = (t("port {port} is free", port=last.port) if last.port_free
            else t("port {port} is still bound", port=last.port))
    if survivors:
        return t("distdoctor: stopped by {signal}: the run's processes {pids} are still alive ({port}); "
                 "end them with: {command}", signal=name, pids=survivors, port=port,
                 command=f"kill -9 {' '.join(map(str, survivors))}")
    return t("distdoctor: stopped by {signal}: the run's processes are gone and {port} (log: {log})",
             signal=name, port=port, log=last.log)


def _bisect_command(args: argparse.Namespace) -> str:
    """`distdoctor bisect` with the options this repro ran with, ready to paste."""
    argv = ["distdoctor", "bisect"]
    if args.python:
        argv += ["--python", args.python]
    if args.nproc != 2:
        argv += ["--nproc", str(args.nproc)]
    if args.backend != "auto":
        argv += ["--backend", args.backend]
    if args.timeout != 60.0:
        argv += ["--timeout", f"{args.timeout:g}"]
    secret = []
    for item in args.env:
        name, _, value = item.partition("=")
        if is_secret_name(name) and value:
            secret.append(name)  # never echoed: taken from the pasting shell's environment
        else:
            argv += ["--env", item]
    if getattr(args, "session", None):
        argv += ["--session", args.session]
    return shlex.join(argv) + "".join(f' --env "{name}=${name}"' for name in secret)


def run(args: argparse.Namespace) -> int:
    from distdoctor.probes.repro import run_repro, script_text

    from .repro_view import Live, render_repro

    kb = knowledge(args)
    with _stop_signals():
        try:
            opts, info = _prepare(args, kb)
            live = Live(enabled=not args.json or sys.stderr.isatty())
            live.say(t("repro: {n} ranks, backend {backend}, torch {torch} ({python}), timeout {seconds}s",
                       n=opts.nproc, backend=info.backend_for(opts.backend), torch=info.torch,
                       python=info.python, seconds=f"{opts.timeout:g}"))
            with live:
                live.begin("repro")
                result, signum = _guarded(lambda cancel: run_repro(opts, kb, live.line, cancel))
        except Stopped as stop:
            _say(_stopped_line(stop.signum, []))
            return 128 + stop.signum
        data = result.to_dict()
        record(args, "repro", data)
        if signum:
            if args.json:
                print_json(data)
            _say(_stopped_line(signum, [result]))
            return 128 + signum
        if args.json:
            print_json(data)
        else:
            script = script_text(opts) if getattr(args, "show_script", False) else ""
            print(render_repro(result, kb, script, _bisect_command(args)))
    return problem_if(not result.passed)


def run_bisect_command(args: argparse.Namespace) -> int:
    if getattr(args, "nodes", None):  # which node, not which switch: bisect_nodes.py
        from .bisect_nodes import run_nodes

        return run_nodes(args)
    from .repro_view import render_bisect

    kb = knowledge(args)
    with _stop_signals():
        try:
            outcome, signum = _bisect(args, kb)
        except Stopped as stop:
            _say(_stopped_line(stop.signum, []))
            return 128 + stop.signum
        data = outcome.to_dict()
        record(args, "bisect", data)
        if args.json:
            print_json(data)
        if signum:
            _say(_stopped_line(signum, [outcome.baseline] + [r.result for r in outcome.runs]))
            return 128 + signum
        if not args.json:
            print(render_bisect(data, kb))
    # a failing baseline is a problem found, even when a switch then explains it (exitcodes.py)
    return problem_if(not outcome.baseline_passed)


def _bisect(args: argparse.Namespace, kb: Any) -> tuple[Any, int]:
    """The bisection itself: (BisectResult, the stopping signal or 0)."""
    from distdoctor.probes.repro import find_switch, plan, run_bisect, trials

    from .repro_view import Live

    for name in args.switch:
        find_switch(kb, name)  # an unknown switch fails before the slow interpreter check
    opts, info = _prepare(args, kb)
    backend = info.backend_for(opts.backend)
    trials(kb, backend, args.switch)  # a switch for the other backend: exit 2 too
    live = Live(enabled=not args.json or sys.stderr.isatty())
    for line in plan(opts, kb, backend, args.switch):
        live.say(t("plan: {line}", line=line))

    def finished(label: str, result: Any) -> None:
        live.say(t("{label}: {outcome} in {seconds}s", label=label, outcome=t(result.outcome.upper()),
                   seconds=f"{result.duration_s:.1f}"))

    with live:
        return _guarded(lambda cancel: run_bisect(
            opts, kb, args.switch, finished, cancel, backend=backend, keep_going=args.all,
            on_line=lambda label, line: live.line(line, label)))
