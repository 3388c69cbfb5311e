"""What the log collector records: a matching line (Hit), a raised exception (Exc), and the
reading state of one file (FileState)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..frozen import Frozen, frozen


@dataclass
class Hit:
    """One line that matched: where, what, and who wrote it."""

    sig: str
    file: str
    line: int
    text: str
    rank: str | None
    proc: str | None
    ts: tuple[int, float] | None
    order: tuple[int, int]  # (file index, line): the reading order


@dataclass
class Exc:
    """A Python exception a process raised: the last line of its traceback."""

    type: str
    message: str
    hit: Hit
    peer_loss: bool  # it reports a lost peer or a timeout: the raiser waited for someone else
    launcher: bool  # raised by the launcher's own process (ChildFailedError, SignalException)
    traceback: bool  # a `Traceback (most recent call last)` header came before it
    frame: str = ""  # the innermost frame of the user's own code in that traceback (train.py:25 in main)


@frozen
class StoreWait(Frozen):
    """A rank's wait in the rendezvous store that gave up: the keys it waited for (none when the
    message lists none, as older torch's "Socket Timeout")."""

    rank: str | None
    keys: tuple[str, ...]
    hit: Hit


@dataclass
class FileState:
    name: str
    index: int
    rank: str | None
    elastic_rank: str | None = None
    local_map: dict[str, str] = field(default_factory=dict)  # torchrun's local rank -> global (x.local_ranks)
    elastic_line: int = 0
    pending_watchdog: tuple[str, int] | None = None  # (key, line) awaiting its WorkNCCL(...)
    first_timeout: int | None = None
    ends: list[int] = field(default_factory=list)
    channels: int = 0
    tracebacks: dict[str | None, int] = field(default_factory=dict)  # who -> last header line
    spawned: tuple[str, int] | None = None  # mp.spawn named this process index before a traceback
    warning: tuple[str, int] | None = None  # (who, line) of the last logging record at WARNING level
    logged_open: int | None = None  # the header line of a traceback a WARNING record printed
    logged: list[tuple[int, int]] = field(default_factory=list)  # (header, exception line) spans
    user_frame: dict[str, tuple[str, int]] = field(default_factory=dict)  # who -> (frame, line) last seen
    store_frame: dict[str, int] = field(default_factory=dict)  # who -> line of its last store wait/get frame
