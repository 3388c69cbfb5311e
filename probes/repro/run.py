"""One real repro run: write the script, launch torchrun, judge pass / error / hang, clean up."""
from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distdoctor.knowledge.i18n import t
from distdoctor.knowledge.statedir import state_dir

from ...knowledge.model import KnowledgeBase
from ..secret_names import mask_env
from .causes import match_causes
from .judge import judge
from .options import ReproInputError, ReproOptions, validate
from .proctree import ProcessTree, free_port, port_is_free
from .script import debug_env, manual_commands, private_dir, torchrun_argv, write_private, write_script

LOG_NAME = "output.log"
MAX_ANALYSE_BYTES = 8 << 20


def runs_root(env: Mapping[str, str] | None = None) -> Path:
    """Where runs are kept: $XDG_STATE_HOME/distdoctor/runs (~/.local/state by default)."""
    return state_dir("runs", env=env)


def new_run_dir(kind: str = "repro") -> Path:
    """A fresh folder name under runs_root(); the root itself is made (or kept) 0700."""
    stamp = time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(2).hex()
    root = runs_root()
    try:
        private_dir(root)
        os.chmod(root, 0o700)  # distdoctor's own folder: an older version made it 0755
    except OSError:
        pass  # write_script names the problem
    return root / f"{stamp}-{kind}"


@dataclass
class ReproResult:
    """What one run did; `to_dict()` is `distdoctor repro --json`."""

    outcome: str  # pass | error | hang | stopped
    duration_s: float
    exit_codes: dict[str, Any]
    causes: list[dict[str, Any]]
    log: str
    run_dir: str
    script: str
    command: list[str]
    env_added: dict[str, str]
    nproc: int
    port: int
    progress: dict[int, str] = field(default_factory=dict)  # rank -> last step finished
    stuck_at: str = ""  # the first step not every rank finished
    first_error: str = ""
    survivors: list[int] = field(default_factory=list)
    port_free: bool = True
    manual: str = ""  # the commands to run the same script by hand on two nodes
    flight_recorder: dict[str, Any] | None = None  # `distdoctor fr` on the dumps the run left

    @property
    def passed(self) -> bool:
        return self.outcome == "pass"

    @property
    def clean(self) -> bool:
        """No process of the run left and its port free again."""
        return not self.survivors and self.port_free

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "duration_s": round(self.duration_s, 3),
                "exit_codes": self.exit_codes, "causes": self.causes, "log": self.log,
                "run_dir": self.run_dir, "script": self.script, "command": self.command,
                "env_added": mask_env(self.env_added), "nproc": self.nproc, "port": self.port,
                "progress": {str(k): v for k, v in sorted(self.progress.items())},
                "stuck_at": self.stuck_at, "first_error": self.first_error,
                "cleanup": {"survivors": self.survivors, "port_free": self.port_free},
                "manual_commands": self.manual, "flight_recorder": self.flight_recorder}


FR_DIR = "flight-recorder"  # per-rank Flight Recorder dumps, inside the run folder


FR_RENAMED = (2, 9)  # torch 2.9 renamed Flight Recorder's variables; the old names still work, with a warning


def flight_recorder_env(run_dir: Path | None, torch: str = "") -> dict[str, str]:
    """Flight Recorder on, dumping into the run folder on a timeout (NCCL) or a failure (the
    script dumps for Gloo), under the names the target torch reads: the current ones from 2.9,
    the older ones before; both when the version is not known."""
    if run_dir is None:
        return {}
    prefix = str(run_dir / FR_DIR / "rank_")
    new = {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_FR_DUMP_TEMP_FILE": prefix}
    old = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": prefix}
    version = _version(torch)
    names = new if version and version >= FR_RENAMED else old if version else {**new, **old}
    return {**names, "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}


def _version(torch: str) -> tuple[int, int] | None:
    match = re.match(r"(\d+)\.(\d+)", torch or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def run_env(opts: ReproOptions, run_dir: Path | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """(the full environment of the run, what distdoctor adds on top of the base)."""
    base = dict(os.environ if opts.base_env is None else opts.base_env)
    user = {**base, **dict(opts.env)}
    fr = {k: v for k, v in flight_recorder_env(run_dir, opts.torch).items() if k not in user}
    added = {**dict(opts.env), **debug_env(user), **fr}
    added["PYTHONUNBUFFERED"] = "1"  # markers must arrive as they happen, not at exit
    return {**base, **added}, added


def read_flight_recorder(folder: Path) -> dict[str, Any] | None:
    """The Flight Recorder dumps a failed or hung run left, compared across ranks (None when the
    run left none); a dump that cannot be read is said, not raised."""
    from ..flightrec import DumpError, as_evidence, read_and_analyse, to_json

    if not folder.is_dir() or not any(folder.iterdir()):
        return None
    try:
        result = read_and_analyse([str(folder)])
    except DumpError as exc:
        return {"dir": str(folder), "error": str(exc)}
    return {"dir": str(folder), **to_json(result), "evidence": as_evidence(result)}


def _read_log(path: Path, lines: int | None = None) -> str:
    """The log's text (its first `lines` lines when given), at most MAX_ANALYSE_BYTES of it."""
    try:
        with open(path, "rb") as fh:
            if lines is not None:
                data = b"".join(fh.readline() for _ in range(lines))
            else:
                data = fh.read()
    except OSError:
        return ""
    return data[-MAX_ANALYSE_BYTES:].decode("utf-8", "replace")


def run_repro(opts: ReproOptions, kb: KnowledgeBase | None = None,
              on_line: Callable[[str], None] | None = None,
              cancel: threading.Event | None = None) -> ReproResult:
    """Run the minimal job for real and judge it. Never leaves a process or a bound port behind:
    on a hang, an error or a stop the whole tree is killed and checked gone. Options that
    cannot describe a run, or a run folder that cannot be written, raise ReproInputError (a
    ValueError) before anything starts."""
    validate(opts)
    run_dir = Path(opts.run_dir) if opts.run_dir else new_run_dir()
    try:
        script = write_script(opts, run_dir)
    except OSError as exc:
        raise ReproInputError(t("cannot write the run folder {run_dir}: {why}", run_dir=run_dir, why=exc.strerror or exc)) from None
    log_path = run_dir / LOG_NAME
    port = free_port()
    python = opts.target_python()
    if os.sep in python:
        python = os.path.abspath(python)  # the run's working directory is its own folder
    argv = torchrun_argv(python, opts.nproc, port, script)
    env, added = run_env(opts, run_dir)
    if "TORCH_FR_DUMP_TEMP_FILE" in added:
        private_dir(run_dir / FR_DIR)
    start = time.monotonic()
    if cancel is not None and cancel.is_set():  # stopped before it began: start nothing
        write_private(log_path, "distdoctor: stopped by the user before the run started\n")
        result = ReproResult("stopped", 0.0, {"launcher": None, "ranks": {}}, [], str(log_path),
                             str(run_dir), str(script), argv, added, opts.nproc, port,
                             port_free=port_is_free(port), manual=manual_commands(opts, script))
        write_private(run_dir / "result.json", json.dumps(result.to_dict(), indent=1))
        return result
    try:
        tree = ProcessTree(argv, env, run_dir, log_path, on_line)
    except OSError as exc:
        write_private(log_path, f"distdoctor: cannot start {argv[0]}: {exc.strerror or exc}\n")
        return ReproResult("error", 0.0, {"launcher": None, "ranks": {}}, [], str(log_path),
                           str(run_dir), str(script), argv, added, opts.nproc, port,
                           first_error=f"cannot start {argv[0]}: {exc.strerror or exc}",
                           manual=manual_commands(opts, script))
    how = tree.wait(start + opts.timeout, cancel)
    duration = time.monotonic() - start
    cut: int | None = None  # what the run printed before distdoctor stopped it
    if how != "exited":
        cut = tree.note(f"no result after {duration:.0f}s: killing the run's process tree"
                        if how == "timeout" else "stopped by the user: killing the run's process tree")
        tree.kill(graceful=True)
    elif tree.survivors():
        tree.kill(graceful=False)  # the launcher is gone; a straggler must not outlive it
    tree.close()
    text = _read_log(log_path, cut)
    verdict = judge(text, tree.returncode, how, opts.nproc)
    causes = [] if verdict.outcome in ("pass", "stopped") else match_causes(
        text, kb, name=str(log_path), symptom="hang" if verdict.outcome == "hang" else "error")
    error = verdict.first_error
    if tree.callback_error:
        error = error or f"output callback failed: {tree.callback_error}"
    result = ReproResult(verdict.outcome, duration, verdict.exit_codes, causes, str(log_path),
                         str(run_dir), str(script), argv, added, opts.nproc, port,
                         verdict.progress, verdict.stuck_at, error, tree.survivors(),
                         port_is_free(port), manual_commands(opts, script),
                         read_flight_recorder(run_dir / FR_DIR))
    # 0600: the record names the job's environment (secrets in it masked) and its hosts
    write_private(run_dir / "result.json", json.dumps(result.to_dict(), indent=1))
    return result
