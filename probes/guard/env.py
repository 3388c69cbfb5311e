"""hardened_env(): the environment lines of the guide's hardened defaults for a backend and torch version."""
from __future__ import annotations

import re


def _version(text: str | None) -> tuple[int, int]:
    """'2.13.0+cpu' -> (2, 13); unknown means a recent torch."""
    m = re.match(r"(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else (99, 0)


def hardened_env(backend: str = "nccl", torch_version: str | None = None) -> list[str]:
    """Shell lines (`export NAME=value  # why`, and `#` hints) for a job script, following GUIDE.md
    section 3: names as the given torch version spells them (TORCH_NCCL_* from 2.2, TORCH_FR_* from
    2.9). With torch_version None, the running torch is asked if it is already imported; else recent."""
    if torch_version is None:
        import sys
        torch = sys.modules.get("torch")
        torch_version = getattr(torch, "__version__", None)
    ver = _version(torch_version)
    backend = backend.lower()
    lines: list[str] = []
    if "nccl" in backend:
        prefix = "TORCH_NCCL_" if ver >= (2, 2) else "NCCL_"
        lines += [
            f"export {prefix}ASYNC_ERROR_HANDLING=3  # tear down the communicator on a failed or timed-out "
            "collective (1 also aborts; 3 is the default and what Flight Recorder dumps need)",
            f"# export {prefix}BLOCKING_WAIT=1  # alternative: raise the timeout in the waiting call "
            "itself (easier to catch, slower)",
        ]
        if ver >= (2, 2):
            buffer = "TORCH_FR_BUFFER_SIZE" if ver >= (2, 9) else "TORCH_NCCL_TRACE_BUFFER_SIZE"
            dump = "TORCH_FR_DUMP_TEMP_FILE" if ver >= (2, 9) else "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"
            lines += [
                f"export {buffer}=2000  # keep the last 2000 collectives per rank (Flight Recorder; 0 = off)",
                "export TORCH_NCCL_DUMP_ON_TIMEOUT=1  # write the Flight Recorder buffer when a collective "
                "times out",
                f"export {dump}=/tmp/nccl_trace_rank_  # where the dumps go (one file per rank, on a "
                "disk that survives the job)",
            ]
        lines += [
            "export NCCL_DEBUG=INFO  # while debugging: versions, interfaces and transports in the log "
            "(remove when fixed)",
            "export NCCL_DEBUG_SUBSYS=INIT,NET  # the connection-setup lines where most problems show",
        ]
    if "gloo" in backend:
        lines.append("# export GLOO_SOCKET_IFNAME=eth0  # the interface every node can reach (see "
                     "`ip -br addr`); the same count of names on every process")
    lines += [
        "export TORCH_DISTRIBUTED_DEBUG=DETAIL  # while debugging: collective checks and mismatch reports",
        "# and in the script: init_process_group(..., timeout=datetime.timedelta(minutes=10)), "
        "distdoctor.guard.preflight(), crash_guard() around the training loop",
    ]
    return lines
