"""Rules on checkpoints: a rank-0 save read without a barrier (DD701), a rank-0 load never
broadcast (DD702), and resume state read from a per-rank path (DD703)."""
from __future__ import annotations

import ast
import re

from .check_sync import rank_ifs
from .model import Script, dotted
from .rules import Finding, finding

SAVE = r"^torch\.save$|(^|\.)(save_checkpoint|save_pretrained|save_model)$|^accelerator\.save$"
LOAD = r"^torch\.load$|(^|\.)(load_checkpoint|load_state_dict)$"
BROADCAST = r"(broadcast|scatter)\w*$|sync_module_states"  # scatter_full_optim_state_dict too
RESUME_KW = ("ckpt_path", "resume_from_checkpoint", "resume_from")
STEP_KEY = re.compile(r"epoch|step|iter", re.I)


def _sync(script: Script, stmt: ast.stmt) -> bool:
    """Does this statement make a collective (a barrier or any other, which also orders ranks)?"""
    return next(script.collectives_in(stmt), None) is not None


def rank0_save_read(script: Script) -> list[Finding]:
    """DD701: save in a rank branch, a load later in the same function, no collective between."""
    out = []
    for node in rank_ifs(script):
        saves = [c for s in node.body for c in script.calls_named(SAVE, s)]
        if not saves:
            continue
        for stmt in script.following(node):
            if _sync(script, stmt):
                break
            loads = [c for c in script.calls_named(r"^torch\.load$|(^|\.)(load_checkpoint|from_pretrained)$", stmt)]
            if loads:
                out.append(finding(script.path, saves[0], "DD701", dotted(saves[0].func) + "()"))
                break
    return out


def rank0_load_no_broadcast(script: Script) -> list[Finding]:
    """DD702: load in one arm of a rank branch only, and no broadcast after it in the function."""
    out = []
    for node in rank_ifs(script):
        loads = [c for s in node.body for c in script.calls_named(LOAD, s)]
        if not loads or any(script.calls_named(LOAD, ast.Module(body=node.orelse, type_ignores=[]))):
            continue
        later = [s for s in script.following(node)]
        if any(next(script.calls_named(BROADCAST, s), None) for s in later):
            continue
        out.append(finding(script.path, loads[0], "DD702", dotted(loads[0].func) + "()"))
    return out


def per_rank_resume(script: Script) -> list[Finding]:
    """DD703: a checkpoint path built from the rank, read for its epoch/step (or handed to a
    framework's resume argument, which restores the step)."""
    out = []
    for call in script.calls():
        for kw in call.keywords:
            if kw.arg in RESUME_KW and script.per_rank(kw.value):
                out.append(finding(script.path, kw.value, "DD703", f"{kw.arg}={ast.unparse(kw.value)[:40]}"))
        q = script.qualname(call.func)
        if not re.search(r"^torch\.load$|(^|\.)load_checkpoint$", q) or not call.args:
            continue
        if not script.per_rank(call.args[0]):
            continue
        holder = script.parents.get(call)
        names = {n.id for t in getattr(holder, "targets", []) for n in ast.walk(t) if isinstance(n, ast.Name)}
        if names and _reads_step(script, names):
            out.append(finding(script.path, call, "DD703", f"{dotted(call.func)}({ast.unparse(call.args[0])[:40]})"))
    return out


def _reads_step(script: Script, names: set[str]) -> bool:
    for node in script.nodes:
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in names:
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and STEP_KEY.search(key.value):
                return True
    return False
