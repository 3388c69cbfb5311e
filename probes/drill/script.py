"""A drill's files: train.py and cmd.sh, the launch command, the label, and the proof check."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from pathlib import Path

from .catalog import TIMEOUT_S, Drill
from .template import render

LOG_DIR = "../logs/torchrun"  # relative to repro/, where the job runs


def write_job(drill: Drill, folder: Path, nproc: int) -> Path:
    """Write DIR/repro/train.py and DIR/repro/cmd.sh; returns DIR/repro (the job's cwd)."""
    job = folder / "repro"
    job.mkdir(parents=True, exist_ok=True)
    (job / "train.py").write_text(render(drill.blocks), encoding="utf-8")
    (job / "cmd.sh").write_text(cmd_sh(drill, nproc), encoding="utf-8")
    return job


def _args(drill: Drill) -> list[str]:
    return ["--timeout", str(TIMEOUT_S), *drill.args]


def torchrun(python: str, nproc: int, port: int, args: list[str], log_dir: str | None) -> list[str]:
    argv = [python, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
            "--master-addr", "127.0.0.1", "--master-port", str(port)]
    if log_dir:
        argv += ["--log-dir", log_dir, "--redirects", "3", "--tee", "3"]
    return argv + ["train.py", *args]


def argv(drill: Drill, python: str, job: Path, nproc: int, port: int) -> list[str]:
    if drill.launcher == "manual":
        return ["bash", "cmd.sh"]  # the shell launch is the job's own launcher
    return torchrun(python, nproc, port, _args(drill), LOG_DIR)


def _setup_args() -> list[str]:
    return ["--timeout", str(TIMEOUT_S), "--epochs", "10", "--max-steps", "16", "--save-every", "8"]


def setup_argv(python: str, job: Path, nproc: int, port: int) -> list[str]:
    return torchrun(python, nproc, port, _setup_args(), None)


def lose_checkpoint(job: Path) -> None:
    """rank 1's newest checkpoint is gone (its node-local scratch was wiped)."""
    lost = job / "ckpt" / "step000016" / "rank1.pt"
    if lost.exists():
        lost.unlink()


def cmd_sh(drill: Drill, nproc: int) -> str:
    lines = ["#!/bin/bash", "# run from the folder holding train.py; MASTER_PORT: any free port",
             "PORT=${MASTER_PORT:-29500}"]
    for key, value in drill.env.items():
        lines.append(f"export {key}={shlex.quote(value)}")
    if drill.hold_port:
        lines.append("# another service already listens on $PORT (the drill holds it open):")
        lines.append("python3 -m http.server \"$PORT\" >/dev/null 2>&1 & holder=$!; sleep 1")
    if drill.setup:
        lines.append("# the previous run: checkpoints per rank at steps 8 and 16")
        lines.append(shlex.join(["torchrun", *torchrun("", nproc, 0, _setup_args(), None)[3:]])
                     .replace("--master-port 0", "--master-port $PORT") + " > setup.log 2>&1")
        lines.append("rm ckpt/step000016/rank1.pt  # rank 1's node-local scratch lost its newest file")
    if drill.launcher == "manual":
        world = nproc + drill.extra_world
        lines += ["mkdir -p ../logs",
                  f"export MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT WORLD_SIZE={world}",
                  "pids=()",
                  f"for r in $(seq 0 {nproc - 1}); do",
                  "  RANK=$r LOCAL_RANK=$r ${PYTHON:-python} train.py "
                  + " ".join(shlex.quote(a) for a in _args(drill))
                  + " > ../logs/rank$r.log 2>&1 & pids+=($!)",
                  "  echo \"started rank $r (pid $!)\"",
                  "done",
                  "rc=0",
                  "for p in \"${pids[@]}\"; do wait \"$p\" || rc=$?; done",
                  "echo \"exit code $rc\"",
                  "exit $rc"]
    else:
        cmd = shlex.join(["torchrun", *torchrun("", nproc, 0, _args(drill), LOG_DIR)[3:]])
        lines.append(cmd.replace("--master-port 0", "--master-port $PORT")
                     + " 2>&1 | tee ../logs/console.log")
    if drill.hold_port:
        lines.append("kill $holder")
    return "\n".join(lines) + "\n"


_FIRST_IDS = re.compile(r"\[rank(\d+)\] epoch (\d+): first sample ids (\[[^\]]*\])")


def fault_shown(drill: Drill, text: str, outcome: str) -> bool:
    """The fault really happened: its proof is in the logs, and the job ended as it must
    (a failed drill where one was injected, a finished one where the fault is silent)."""
    if drill.name == "healthy":
        return outcome == "pass" and "Traceback" not in text
    if drill.name == "same-data":
        seen: dict[str, set[str]] = {}
        for _rank, epoch, ids in _FIRST_IDS.findall(text):
            seen.setdefault(epoch, set()).add(ids)
        return outcome == "pass" and bool(seen) and all(len(v) == 1 for v in seen.values())
    return outcome != "pass" and re.search(drill.proof, text) is not None


def label(drill: Drill, nproc: int, outcome: str = "") -> dict:
    """The answer key; the symptom is what on call saw: a job distdoctor had to kill hung,
    whatever the drill usually does (spawn-in-torchrun can hang or fail, by a race)."""
    launcher = ("manual env:// launch (shell background jobs)" if drill.launcher == "manual"
                else "torchrun")
    if drill.name == "healthy":
        return {"healthy": True, "framework": "pytorch-ddp", "launcher": launcher,
                "notes": f"distdoctor drill job without a fault, {nproc} ranks, --tee 3 with "
                         "per-rank --log-dir files; identical all-reduced loss on every rank"}
    symptom = "hang" if outcome == "hang" else drill.symptom
    out = {"primary": drill.cause, "also": [], "symptom": symptom,
           "culprit_rank": drill.culprit, "framework": "pytorch-ddp", "launcher": launcher,
           "how": drill.how, "drill": drill.name, "nproc": nproc}
    if drill.name == "same-data":
        out["notes"] = ("Silent fault: the job exits 0. 'symptom' can only be hang|error, so it is "
                        "'error' in the sense of a correctness error; the evidence is the identical "
                        "first sample ids and losses printed by every rank.")
    return out


def write_label(drill: Drill, folder: Path, nproc: int, outcome: str = "") -> None:
    (folder / "label.json").write_text(json.dumps(label(drill, nproc, outcome), indent=1) + "\n",
                                       encoding="utf-8")


def tidy_for_record(drill: Drill, folder: Path, python: str) -> None:
    """A recording keeps logs, label and repro only, with this machine's paths replaced by
    neutral ones (/home/user/...), the way the shared recordings were made."""
    shutil.rmtree(folder / "repro" / "ckpt", ignore_errors=True)
    shutil.rmtree(folder / "work", ignore_errors=True)
    venv = str(Path(python).parent.parent)
    subs = [(str(folder.resolve()), f"/home/user/runs/drill-{drill.name}"),
            (str(folder), f"/home/user/runs/drill-{drill.name}"),
            (venv, "/home/user/venv"), (os.path.realpath(venv), "/home/user/venv"),
            (str(Path.home()), "/home/user")]
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.suffix not in (".log", ".py", ".sh", ".txt"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        new = text
        for old, neutral in subs:
            if old and old != "/":
                new = new.replace(old, neutral)
        if new != text:
            path.write_text(new, encoding="utf-8")
