"""Where a rank is, from its main thread's frames: which collective, the dataloader, a checkpoint,
eval, backward, or plain Python at file:line. Pure functions over frame dicts (innermost first)."""
from __future__ import annotations

import re
from typing import Any

from distdoctor.knowledge.frozen import Frozen, frozen

from .frames import python_frames

# kinds, in the order they win when a stack holds more than one (a rank in eval that is inside an
# all_reduce is waiting in the all_reduce: that is what matters for a hang)
COLLECTIVE, BARRIER, DATALOADER, CHECKPOINT, EVAL, BACKWARD, PYTHON = (
    "collective", "barrier", "dataloader", "checkpoint", "eval", "backward", "python")
WAITING_KINDS = (COLLECTIVE, BARRIER)

_C10D = "torch/distributed/distributed_c10d.py"
_BARRIERS = {"barrier", "monitored_barrier"}
_CKPT_NAME = re.compile(r"(^|_)(save|load|restore|write|read)_?(checkpoint|ckpt|state_dict|model)s?$|"
                        r"^(checkpoint|ckpt)(_\w+)?$", re.I)
_EVAL_NAME = re.compile(r"^(evaluate|evaluation|eval|validate|validation|run_eval|run_validation|"
                        r"test_step|eval_\w+|evaluate_\w+|validation_\w+|validate_\w+|\w+_eval|"
                        r"\w+_evaluate|\w+_validation)$", re.I)
_LIBRARY = re.compile(r"(site|dist)-packages/|/lib/python\d[\d.]*/|^<frozen |^torch/")


@frozen
class Place(Frozen):
    """Where one rank is: `kind`, the operation (`all_reduce`, `save_checkpoint`...), the call site
    (`train.py:88`) and, for a rank inside user code under the operation, that inner frame."""

    kind: str
    op: str
    site: str
    inner: str = ""

    @property
    def where(self) -> str:
        """One line: `all_reduce (train.py:88)`."""
        return f"{self.op} ({self.site})" if self.site else self.op

    @property
    def waiting(self) -> bool:
        """In a collective or a barrier: waiting on the other ranks."""
        return self.kind in WAITING_KINDS


def short_name(name: str) -> str:
    """`_BaseDataLoaderIter.__next__` -> `__next__`: the function itself, without its class."""
    return name.rsplit(".", 1)[-1]


def is_library(file: str) -> bool:
    """Code of Python, torch or an installed package, not the user's own."""
    return bool(_LIBRARY.search(file.replace("\\", "/")))


def site_of(frame: dict[str, Any]) -> str:
    """`train.py:88`: the file's base name and the line."""
    base = str(frame.get("file", "?")).replace("\\", "/").rsplit("/", 1)[-1]
    return f"{base}:{frame.get('line', 0)}"


def _caller_site(frames: list[dict[str, Any]], index: int) -> str:
    """The user's line that called into the operation at frames[index]: the first user frame
    further out; the operation's own line when every outer frame is library code."""
    for frame in frames[index + 1:]:
        if not is_library(str(frame.get("file", ""))):
            return site_of(frame)
    return site_of(frames[index])


def _in(frame: dict[str, Any], part: str) -> bool:
    return part in str(frame.get("file", "")).replace("\\", "/")


def _collective(frames: list[dict[str, Any]]) -> Place | None:
    """The outermost public function of distributed_c10d.py on the stack: what the user called
    (all_gather_object, not the all_gather it calls; new_group, not _store_based_barrier)."""
    hits = [i for i, f in enumerate(frames) if _in(f, _C10D)]
    if not hits:
        return None
    public = [i for i in hits if not short_name(str(frames[i]["name"])).startswith("_")]
    index = public[-1] if public else hits[-1]
    op = short_name(str(frames[index]["name"]))
    return Place(BARRIER if op in _BARRIERS else COLLECTIVE, op, _caller_site(frames, index))


def _library_block(frames: list[dict[str, Any]], part: str, kind: str, op: str) -> Place | None:
    hits = [i for i, f in enumerate(frames) if _in(f, part)]
    if not hits:
        return None
    outer = hits[-1]
    # user code running under the library (a dataset's __getitem__): the innermost user frame
    inner = next((f for f in frames[:hits[0]] if not is_library(str(f.get("file", "")))), None)
    detail = f"{inner['name']} ({site_of(inner)})" if inner else ""
    return Place(kind, op, _caller_site(frames, outer), detail)


def _named(frames: list[dict[str, Any]], pattern: re.Pattern[str], kind: str) -> Place | None:
    """A user function named like the activity (save_checkpoint, evaluate): the outermost one,
    at the line it is at now."""
    for frame in reversed(frames):
        if not is_library(str(frame.get("file", ""))) and pattern.search(short_name(str(frame["name"]))):
            return Place(kind, short_name(str(frame["name"])), site_of(frame))
    return None


def classify(frames: list[dict[str, Any]]) -> Place:
    """Where a rank is, from its main thread's frames (innermost first)."""
    py = python_frames(frames)
    if not py:
        return Place(PYTHON, "no Python frame", "")
    found = (_collective(py)
             or _library_block(py, "torch/utils/data/", DATALOADER, "dataloader")
             or _library_block(py, "torch/distributed/checkpoint/", CHECKPOINT, "dcp checkpoint")
             or _named(py, _CKPT_NAME, CHECKPOINT)
             or _library_block(py, "torch/serialization.py", CHECKPOINT, _torch_io(py))
             or _named(py, _EVAL_NAME, EVAL)
             or _library_block(py, "torch/autograd/", BACKWARD, "backward"))
    if found:
        return found
    user = next((f for f in py if not is_library(str(f.get("file", "")))), py[0])
    return Place(PYTHON, short_name(str(user["name"])), site_of(user))


def _torch_io(frames: list[dict[str, Any]]) -> str:
    names = {short_name(str(f["name"])) for f in frames if _in(f, "torch/serialization.py")}
    return "torch.load" if "load" in names and "save" not in names else "torch.save"
