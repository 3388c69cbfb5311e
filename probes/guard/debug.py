"""`debug_server()`: start PyTorch's debug server on every rank in one line, so `distdoctor run`,
`watch`, `stacks` and `fr` can read every rank's stacks and Flight Recorder over HTTP (no ptrace)."""
from __future__ import annotations

import os
import socket

PORT = 25999


def debug_server(port: int = PORT, **options: object) -> str:
    """Call right after `init_process_group`, on every rank: starts torch's debug server (torch
    2.13+, rank 0 serves http://HOST:port) and returns its address. It needs Jinja2 and tabulate
    (aiohttp makes it faster) in the job's environment; a missing one raises ImportError naming
    what to install. `options` go to torch.distributed.debug.start_debug_server."""
    for module in ("jinja2", "tabulate"):
        try:
            __import__(module)
        except ImportError:
            raise ImportError(f"distdoctor.guard.debug_server needs {module}: pip install jinja2 tabulate aiohttp"
                              ) from None
    from torch.distributed.debug import start_debug_server

    start_debug_server(port=port, **options)  # type: ignore[arg-type]
    host = os.environ.get("MASTER_ADDR") or socket.gethostname()
    return f"http://{host}:{port}"
