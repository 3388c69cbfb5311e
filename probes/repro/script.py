"""The repro script's text, the torchrun command lines, and the commands for a run by hand."""
from __future__ import annotations

import os
import shlex
import socket
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from ..secret_names import env_assignment
from .options import ReproOptions

TEMPLATE = "repro_script.py.txt"
SCRIPT_NAME = "distdoctor_repro.py"
# Every run leaves evidence: NCCL's connection and transport lines, torch's collective checks.
DEBUG_ENV = {"NCCL_DEBUG": "INFO", "TORCH_DISTRIBUTED_DEBUG": "DETAIL"}
MANUAL_PORT = 29500


def script_text(opts: ReproOptions) -> str:
    """The self-contained repro script for these options (backend and timeout filled in)."""
    text = resources.files(__package__).joinpath(TEMPLATE).read_text(encoding="utf-8")
    return (text.replace("__DISTDOCTOR_BACKEND__", repr(opts.backend))
                .replace("__DISTDOCTOR_TIMEOUT__", repr(script_timeout(opts))))


def script_timeout(opts: ReproOptions) -> int:
    """The script's own init/collective timeout: longer than distdoctor's, so that a hang is
    seen (and killed) as a hang by distdoctor rather than turned into a timeout error."""
    return int(opts.timeout) + 60


def private_dir(directory: Path) -> None:
    """Create `directory` and any missing parent as 0700 (a run's log and records can hold what
    the job printed: host names, paths, the odd token); folders that exist are left alone."""
    missing = []
    for folder in [directory, *directory.parents]:
        if folder.exists():
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass  # made meanwhile by a concurrent run
        os.chmod(folder, 0o700)  # mkdir's mode passes through the umask
    if not directory.is_dir():
        raise NotADirectoryError(20, "Not a directory", str(directory))


def write_private(path: Path, text: str) -> None:
    """Write a file readable by its owner only (0600), also when it was there before."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        os.fchmod(fh.fileno(), 0o600)
        fh.write(text)


def write_script(opts: ReproOptions, directory: Path) -> Path:
    private_dir(directory)
    path = directory / SCRIPT_NAME
    write_private(path, script_text(opts))
    return path


def debug_env(env: Mapping[str, str]) -> dict[str, str]:
    """The debug variables to add: a user's TRACE is kept, anything quieter becomes INFO."""
    out = dict(DEBUG_ENV)
    if env.get("NCCL_DEBUG", "").upper() == "TRACE":
        out.pop("NCCL_DEBUG")
    return out


def torchrun_argv(python: str, nproc: int, port: int, script: Path | str, *, nnodes: int = 1,
                  node_rank: int | None = None, master_addr: str = "127.0.0.1") -> list[str]:
    """`PY -m torch.distributed.run ...`: the target interpreter's own torchrun."""
    argv = [python, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
            "--nnodes", str(nnodes)]
    if node_rank is not None:
        argv += ["--node-rank", str(node_rank)]
    return argv + ["--master-addr", master_addr, "--master-port", str(port), str(script)]


def routable_address(timeout: float = 1.0) -> str:
    """This node's outbound address: a UDP connect sends no packet but picks the route's source
    address. Falls back to the host name when there is no route."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(timeout)
    try:
        sock.connect(("8.8.8.8", 53))  # any off-node address: UDP connect sends nothing
        address = sock.getsockname()[0]
    except OSError:
        address = ""
    finally:
        sock.close()
    if not address or address.startswith("127.") or address == "0.0.0.0":
        return socket.gethostname()
    return address


def _remote(path: str) -> str:
    """The remote half of an scp line: legacy scp hands it to the remote shell, so a path that
    needs quoting is quoted for that shell too (quoted once, `$(...)` in a run folder's name
    would run there). SFTP-mode scp takes it literally: such a path then fails, harmlessly."""
    once = shlex.quote(path)
    return once if once == path else shlex.quote(once)


def manual_commands(opts: ReproOptions, script: Path | str | None = None,
                    master_addr: str | None = None) -> str:
    """Shell lines to run the same script by hand on two nodes (or opts.nnodes, if more)."""
    nodes = max(2, opts.nnodes)
    addr = master_addr or routable_address()
    path = str(script) if script else f"./{SCRIPT_NAME}"
    env = {**dict(opts.env), **debug_env(opts.env)}
    # a secret given with --env is never printed: the line takes it from the pasting shell
    prefix = " ".join(env_assignment(k, v) for k, v in env.items())
    python = opts.target_python()
    # the scp command on a line of its own: inside a comment it could not be pasted as is
    lines = ["# 1. copy the script to the same path on every node, e.g.:",
             f"scp {shlex.quote(path)} NODE1:{_remote(path)}",  # an absolute path: never an option
             f"# 2. run one line per node (node 0 is this one, {addr}); open port {MANUAL_PORT} "
             "between the nodes"]
    for rank in range(nodes):
        argv = torchrun_argv(python, opts.nproc, MANUAL_PORT, path, nnodes=nodes, node_rank=rank,
                             master_addr=addr)
        lines.append(f"# node {rank}:")
        lines.append(f"{prefix} {shlex.join(argv)}")
    lines.append("# every rank prints DISTDOCTOR_STEP lines; the last one of each rank shows where it stopped")
    return "\n".join(lines)
