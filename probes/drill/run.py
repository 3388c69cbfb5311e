"""Run one drill for real: write the job, launch it the way its fault needs, keep every log.

The process tree, the free port and the cleanup check are the repro runner's (imported, not
copied): a drill is killed whole on a hang, leaves no process behind and frees its port.
Folder layout (the same for a learner's run and for `--record`):

    DIR/repro/train.py, DIR/repro/cmd.sh   the job and how to run it by hand
    DIR/logs/console.log                   the launcher's console, as a terminal shows it
    DIR/logs/torchrun/...                  torchrun --log-dir: every rank's stdout/stderr
    DIR/logs/rank<N>.log                   (manual launches) each rank's redirected output
    DIR/label.json                         the answer: cause, culprit rank, symptom, how
"""
from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distdoctor.knowledge.errors import InputError
from distdoctor.knowledge.i18n import t

from ..repro.proctree import ProcessTree, free_port, port_is_free
from ..repro.run import new_run_dir
from . import script
from .catalog import Drill, get

MAX_WALL_S = 85.0  # every drill ends within 90 s, setup run included
# variables of the user's own shell that would change the drill's fault (or add one)
_CLEAR = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
          "MASTER_PORT", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TORCHELASTIC_RUN_ID",
          "TORCHELASTIC_USE_AGENT_STORE", "TORCH_DISTRIBUTED_DEBUG")


class DrillError(InputError, ValueError):
    """The drill cannot start: unknown name, bad --nproc, unusable folder or interpreter."""


@dataclass
class DrillResult:
    drill: str
    outcome: str  # pass | error | hang | stopped: how the job ended
    wall_s: float
    dir: str
    cause: str
    rank: str | None
    reproduced: bool  # the fault's proof line is in the logs
    exit_code: int | None = None
    port: int = 0
    survivors: list[int] = field(default_factory=list)
    port_free: bool = True
    command: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def clean(self) -> bool:
        return not self.survivors and self.port_free

    def to_dict(self) -> dict[str, Any]:
        return {"drill": self.drill, "outcome": self.outcome, "wall_s": round(self.wall_s, 2),
                "dir": self.dir, "expected": {"cause": self.cause, "rank": self.rank},
                "reproduced": self.reproduced, "exit_code": self.exit_code, "port": self.port,
                "cleanup": {"survivors": self.survivors, "port_free": self.port_free},
                "command": self.command, "note": self.note}


def check_request(name: str, nproc: int | None, timeout: float) -> Drill:
    drill = get(name)
    if drill is None:
        from .catalog import DRILLS
        raise DrillError(t("unknown drill {name} (one of: {known})", name=repr(name), known=', '.join(DRILLS)))
    if nproc is not None and not 2 <= nproc <= 4:
        raise DrillError(t("--nproc must be 2, 3 or 4 (drills run on CPU, Gloo)"))
    if not 5 <= timeout <= MAX_WALL_S:
        raise DrillError(t("--timeout must be between 5 and {most} seconds", most=format(MAX_WALL_S, ".0f")))
    return drill


def run_drill(name: str, *, nproc: int | None = None, python: str = "", run_dir: Path | None = None,
              timeout: float = 75.0, record: bool = False, fault: bool = True,
              on_line: Callable[[str], None] | None = None,
              cancel: threading.Event | None = None) -> DrillResult:
    """Run the drill for real. `fault=False` runs its healthy twin (same job, no fault)."""
    drill = check_request(name, nproc, timeout)
    if not fault:
        drill = get("healthy")
        assert drill is not None
    n = nproc or drill.nproc
    python = _python(python)
    folder = Path(run_dir) if run_dir else new_run_dir(f"drill-{name}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if any(folder.iterdir()):
            raise DrillError(t("{folder} already holds files: give an empty or new folder", folder=folder))
        (folder / "logs").mkdir()
        job = script.write_job(drill, folder, n)
    except OSError as exc:
        raise DrillError(t("cannot write the drill folder {folder}: {why}", folder=folder, why=exc.strerror or exc)) from None
    env = _env(drill)
    start = time.monotonic()
    deadline = start + timeout
    holder: socket.socket | None = None
    port = free_port()
    note = ""
    try:
        if drill.setup:
            how, _, _ = _launch(script.setup_argv(python, job, n, free_port()), env, job,
                                folder / "work" / "setup.log", deadline, cancel, None)
            if how != "exited":
                note = "the setup run did not finish"
            script.lose_checkpoint(job)
        if drill.hold_port:
            holder, port = _hold()
        argv = script.argv(drill, python, job, n, port)
        how, code, tree_left = _launch(argv, {**env, "PYTHON": python, "MASTER_PORT": str(port)},
                                       job, folder / "logs" / "console.log", deadline, cancel,
                                       on_line)
    finally:
        if holder is not None:
            holder.close()
    wall = time.monotonic() - start
    outcome = {"timeout": "hang", "cancelled": "stopped"}.get(how, "pass" if code == 0 else "error")
    text = _all_logs(folder / "logs")
    reproduced = script.fault_shown(drill, text, outcome)
    if not reproduced and "No module named 'torch'" in text:
        raise DrillError(t("--python {python}: no torch there (the job could not start)", python=python))
    if not reproduced and "[rank" not in text and "torch" not in text:
        first = next((ln for ln in text.splitlines() if ln.strip()), "no output at all")
        raise DrillError(t("--python {python}: the job could not start ({error})", python=python, error=first[:120]))
    script.write_label(drill, folder, n, outcome)
    if record:
        script.tidy_for_record(drill, folder, python)
    return DrillResult(name if fault else "healthy", outcome, wall, str(folder), drill.cause,
                       drill.culprit, reproduced, code, port, tree_left, port_is_free(port),
                       argv, note)


def _python(python: str) -> str:
    import sys
    python = python or sys.executable
    if os.sep in python:
        python = os.path.abspath(python)  # the job runs in its own folder
        if not os.access(python, os.X_OK):
            raise DrillError(t("--python {python}: not an executable file", python=python))
    elif shutil.which(python) is None:
        raise DrillError(t("--python {python}: not found on PATH", python=python))
    return python


def _env(drill: Drill) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _CLEAR}
    env["PYTHONUNBUFFERED"] = "1"  # lines arrive as they happen, as in a real job's console
    return {**env, **drill.env}


def _hold(tries: int = 5) -> tuple[socket.socket, int]:
    """Another service on MASTER_PORT: a plain listening socket, as a local web server has.
    (socket, port); another free port is taken if the first is grabbed meanwhile."""
    for attempt in range(tries):
        port = free_port()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("0.0.0.0", port))
            sock.listen(1)
            return sock, port
        except OSError:
            sock.close()
            if attempt == tries - 1:
                raise DrillError(t("cannot hold a port for the port-in-use drill")) from None
    raise DrillError(t("cannot hold a port for the port-in-use drill"))


def _launch(argv: list[str], env: dict[str, str], cwd: Path, log: Path, deadline: float,
            cancel: threading.Event | None,
            on_line: Callable[[str], None] | None) -> tuple[str, int | None, list[int]]:
    """(exited | timeout | cancelled, exit code, survivors): the tree is killed whole unless it
    ended by itself with nothing left."""
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        tree = ProcessTree(argv, env, cwd, log, on_line)
    except OSError as exc:
        log.write_text(f"cannot start {argv[0]}: {exc.strerror or exc}\n", encoding="utf-8")
        return "exited", None, []
    how = tree.wait(deadline, cancel)
    if how != "exited":
        tree.kill(graceful=True)  # torchrun reports what it saw, as it would on a scancel
    elif tree.survivors():
        tree.kill(graceful=False)
    tree.close()
    return how, tree.returncode, tree.survivors()


def _all_logs(logs: Path) -> str:
    parts = []
    for path in sorted(logs.rglob("*")):
        if path.is_file():
            parts.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(parts)
