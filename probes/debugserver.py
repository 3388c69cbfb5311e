"""PyTorch's debug server as a source (torch 2.13 `torch.distributed.debug.start_debug_server`,
rank 0's frontend on port 25999 by default): every rank's Python stacks (`/stacks`) and Flight
Recorder (`/fr_trace_json`) over HTTP, under a timeout, with no ptrace (so it works in a
container without ptrace rights). The frontend gathers each rank's answer and renders it in a
`<pre>` block after a `<h2>Rank N: ADDR</h2>` heading; that is what is read here."""
from __future__ import annotations

import html
import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from distdoctor.knowledge.errors import InputError
from distdoctor.knowledge.i18n import t

DEFAULT_URL = "http://127.0.0.1:25999"
TIMEOUT_S = 30.0  # the frontend waits on every rank's worker server before it answers
MAX_BYTES = 256 << 20

_BLOCK = re.compile(r"<h2>Rank (\d+): ([^<]*)</h2>\s*(?:<p>Failed to fetch: status=(\d+)</p>\s*)?<pre>(.*?)</pre>",
                    re.S)
_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+) \(most recent call first\):$")
_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.+)$')


class DebugServerError(InputError):
    """The debug server could not be asked (not running, refused, timed out, not its page)."""


def fetch(url: str, path: str, timeout: float = TIMEOUT_S) -> str:
    """The page at `url` + `path` as text; DebugServerError with the reason otherwise."""
    full = url.rstrip("/") + path
    if not full.startswith(("http://", "https://")):
        raise DebugServerError(t("{url}: not an http:// address", url=url))
    try:
        with urllib.request.urlopen(full, timeout=timeout) as resp:  # noqa: S310 - http(s) only, checked above
            return resp.read(MAX_BYTES).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        raise DebugServerError(t("{url}: HTTP {code}", url=full, code=exc.code)) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DebugServerError(t("{url}: {why}", url=full, why=reason)) from None


def blocks(page: str) -> list[dict[str, Any]]:
    """[{"rank", "addr", "status", "text"}] of a stacks or JSON page, in rank order."""
    out = [{"rank": str(int(m.group(1))), "addr": html.unescape(m.group(2).strip()),
            "status": int(m.group(3)) if m.group(3) else 200, "text": html.unescape(m.group(4))}
           for m in _BLOCK.finditer(page)]
    if not out:
        raise DebugServerError(t("the page holds no rank's answer (is this torch's debug server?)"))
    return out


def parse_traceback(text: str) -> list[dict[str, Any]]:
    """The main thread's frames, innermost first, from faulthandler's dump of every thread: the
    thread whose outermost frame is `<module>` (the server's own thread has no Python frame)."""
    threads: list[list[dict[str, Any]]] = []
    for line in text.splitlines():
        if _THREAD.match(line.strip()):
            threads.append([])
            continue
        m = _FRAME.match(line)
        if m and threads:
            threads[-1].append({"name": m.group(3).strip(), "file": m.group(1), "line": int(m.group(2))})
    with_module = [th for th in threads if th and th[-1]["name"] == "<module>"]
    if with_module:
        return with_module[0]
    return max(threads, key=len, default=[])


def stacks(url: str = DEFAULT_URL, timeout: float = TIMEOUT_S, host: str = "") -> list[dict[str, Any]]:
    """Every rank as stacks.analyse() takes them: {"rank", "pid", "host", "frames"} (+ "error")."""
    out = []
    for b in blocks(fetch(url, "/stacks", timeout)):
        entry: dict[str, Any] = {"rank": b["rank"], "pid": None, "host": host or _host(b["addr"]), "frames": []}
        if b["status"] != 200:
            entry["error"] = t("debug server: rank {rank} answered {status}", rank=b["rank"], status=b["status"])
        else:
            entry["frames"] = parse_traceback(b["text"])
            if not entry["frames"]:
                entry["error"] = t("debug server: no Python frame in rank {rank}'s answer", rank=b["rank"])
        out.append(entry)
    return out


def flight_recorder(url: str, folder: Path, timeout: float = TIMEOUT_S) -> list[str]:
    """Every rank's Flight Recorder as JSON dumps (`rank_N.json`, the rank added) under `folder`,
    for probes/flightrec; the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for b in blocks(fetch(url, "/fr_trace_json", timeout)):
        if b["status"] != 200:
            continue
        try:
            doc = json.loads(b["text"])
        except ValueError:
            continue  # a rank whose answer is not JSON: the others still count
        if not isinstance(doc, dict):
            continue
        doc.setdefault("rank", int(b["rank"]))
        doc.setdefault("entries", [])
        path = folder / f"rank_{b['rank']}.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        paths.append(str(path))
    return paths


def _host(addr: str) -> str:
    """`http://node7:60013/handler/...` -> `node7`."""
    m = re.match(r"https?://\[?([^\]/:]+)", addr)
    return m.group(1) if m else ""
