"""py-spy dump output (JSON, or text from an older py-spy) as threads of plain frame dicts."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

MAX_NAME = 200  # a C++ template frame name from --native can run to kilobytes

# `    all_reduce (torch/distributed/distributed_c10d.py:3252)` or a native `clock_nanosleep (libc.so.6)`
_TEXT_FRAME = re.compile(r"^\s{2,}(?P<name>.+?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)\s*$")
_TEXT_THREAD = re.compile(r"^Thread (?P<tid>0x[0-9a-fA-F]+|\d+)(?: \((?P<state>[^)]*)\))?"
                          r"(?::\s*\"(?P<name>.*)\")?\s*$")


class DumpUnreadable(ValueError):
    """py-spy printed something that is not a stack dump; the message says what."""


@dataclass
class Thread:
    """One thread of a dumped process: frames innermost first, as py-spy prints them."""

    tid: int
    name: str
    active: bool
    frames: list[dict[str, Any]] = field(default_factory=list)


def _frame(name: str, file: str, line: int, native: bool) -> dict[str, Any]:
    frame: dict[str, Any] = {"name": name[:MAX_NAME], "file": file, "line": line}
    if native:
        frame["native"] = True
    return frame


def parse_json_dump(text: str) -> list[Thread]:
    """`py-spy dump --json`: a list of threads, each with frames (innermost first)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DumpUnreadable(f"py-spy --json output is not JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(data, list):
        raise DumpUnreadable("py-spy --json output is not a list of threads")
    threads = []
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("frames"), list):
            raise DumpUnreadable("py-spy --json output: a thread without frames")
        frames = []
        for f in item["frames"]:
            if not isinstance(f, dict):
                continue
            # native frames carry the library in `module` and line 0; Python frames have no module
            native = bool(f.get("module"))
            frames.append(_frame(str(f.get("name", "?")), str(f.get("filename") or
                                                            f.get("short_filename") or "?"),
                                 int(f.get("line") or 0), native))
        tid = item.get("os_thread_id") or item.get("thread_id") or 0
        threads.append(Thread(int(tid), str(item.get("thread_name") or ""),
                              bool(item.get("active")), frames))
    return threads


def parse_text_dump(text: str) -> list[Thread]:
    """`py-spy dump` as text: `Thread N (idle): "MainThread"` then indented `name (file:line)`."""
    threads: list[Thread] = []
    for line in text.splitlines():
        head = _TEXT_THREAD.match(line)
        if head:
            tid = head.group("tid")
            state = head.group("state") or ""
            threads.append(Thread(int(tid, 16) if tid.startswith("0x") else int(tid),
                                  head.group("name") or "", state.startswith("active")))
            continue
        frame = _TEXT_FRAME.match(line)
        if frame and threads:
            file, num = frame.group("file"), frame.group("line")
            native = num is None  # py-spy prints native frames as `name (library)`
            threads[-1].frames.append(_frame(frame.group("name"), file, int(num or 0), native))
    if not threads:
        first = text.strip().splitlines()[0][:120] if text.strip() else "nothing"
        raise DumpUnreadable(f"py-spy printed no thread: {first!r}")
    return threads


def main_thread(threads: list[Thread], pid: int) -> Thread | None:
    """The thread a rank's training loop runs on: the main thread (its tid is the pid), else the
    one named MainThread, else the first thread with Python frames."""
    for thread in threads:
        if thread.tid == pid:
            return thread
    for thread in threads:
        if thread.name == "MainThread":
            return thread
    return next((t for t in threads if python_frames(t.frames)), threads[0] if threads else None)


def python_frames(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The frames that are Python code (not native): the ones that say where a rank is."""
    return [f for f in frames if not f.get("native")]
