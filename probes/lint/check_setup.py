"""Rules on starting and ending the job: mp.spawn under torchrun (DD301), init_process_group
without a timeout or device (DD401, DD402), and exits that leave peers waiting (DD901-DD903)."""
from __future__ import annotations

import ast

from .check_sync import rank_ifs
from .model import TORCHRUN_ENV, Script, dotted, env_key
from .rules import Finding, finding

INIT = r"^torch\.distributed\.init_process_group$"
DESTROY = r"destroy_process_group$"
SPAWN = r"^(torch\.)?multiprocessing\.(spawn|start_processes|Process)$|\.Process$"


def _reads_torchrun_env(node: ast.AST) -> bool:
    """Does this code read (not set) one of the variables torchrun sets?"""
    for sub in ast.walk(node):
        if env_key(sub) in TORCHRUN_ENV and not isinstance(getattr(sub, "ctx", None), ast.Store):
            return True
    return False


def spawn_under_torchrun(script: Script) -> list[Finding]:
    """DD301: mp.spawn / Process plus init_process_group in a script that reads torchrun's variables,
    unless the spawn sits behind a check of those variables (one launcher or the other)."""
    if not any(script.calls_named(INIT)):
        return []
    if not _reads_torchrun_env(script.tree):
        return []
    out = []
    for call in script.calls_named(SPAWN):
        if script.qualname(call.func).endswith(".Process") and "multiprocessing" not in script.qualname(call.func):
            continue
        guard = script.enclosing(call, (ast.If,))
        guarded = False
        while guard is not None:
            # a test of torchrun's variables, or an if/else offering both launch paths by flag
            if _reads_torchrun_env(guard.test) or guard.orelse:  # type: ignore[attr-defined]
                guarded = True
                break
            guard = script.enclosing(guard, (ast.If,))
        if not guarded:
            out.append(finding(script.path, call, "DD301", dotted(call.func)))
    return out


def init_without_timeout(script: Script) -> list[Finding]:
    """DD401 (no timeout=) and DD402 (NCCL, no device_id=, and a barrier that will guess the GPU)."""
    out = []
    barrier_guesses = any(not any(k.arg == "device_ids" for k in c.keywords)
                          for c in script.calls_named(r"^torch\.distributed\.barrier$"))
    for call in script.calls_named(INIT):
        kws = {k.arg for k in call.keywords}
        if None in kws:  # **kwargs: cannot tell
            continue
        name = dotted(call.func)
        if "timeout" not in kws:
            out.append(finding(script.path, call, "DD401", name))
        backend = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "backend"), None)
        nccl = isinstance(backend, ast.Constant) and isinstance(backend.value, str) and "nccl" in backend.value
        if nccl and "device_id" not in kws and barrier_guesses:
            out.append(finding(script.path, call, "DD402", name))
    return out


def _guarded(script: Script) -> bool:
    """Does the script end the process group on a crash (crash_guard, a finally/except that destroys
    it, or a handler that exits the process)?"""
    if any("crash_guard" in q for q in script.aliases.values()) or \
            any(dotted(c.func).endswith("crash_guard") for c in script.calls()):
        return True
    for node in script.nodes:
        blocks = []
        if isinstance(node, ast.Try):
            blocks = [*node.finalbody, *[s for h in node.handlers for s in h.body]]
        for stmt in blocks:
            if any(script.calls_named(DESTROY, stmt)) or any(script.calls_named(r"^os\._exit$", stmt)):
                return True
    return False


def _handlers(script: Script) -> list[ast.AST]:
    """Except blocks and the functions registered as signal or atexit handlers."""
    out: list[ast.AST] = [n for n in script.nodes if isinstance(n, ast.ExceptHandler)]
    for call in script.calls_named(r"^signal\.signal$|^atexit\.register$|sys\.excepthook"):
        for arg in call.args:
            if isinstance(arg, ast.Name) and arg.id in script.functions:
                out.extend(script.functions[arg.id])
    return out


def exits(script: Script) -> list[Finding]:
    """DD901: init without destroy; DD902: os._exit in a crash handler before destroy;
    DD903: a non-daemon thread with no crash guard keeps a crashed rank alive."""
    inits = list(script.calls_named(INIT))
    distributed = bool(inits) or script.uses(r"^torch\.distributed")
    if not distributed:
        return []
    out = []
    if inits and not any(script.calls_named(DESTROY)):
        out.append(finding(script.path, inits[0], "DD901", dotted(inits[0].func)))
    # crash handlers, and rank branches (one rank vanishing mid-training is the same for its peers)
    for block in [*_handlers(script), *rank_ifs(script)]:
        destroyed_at = min((c.lineno for c in script.calls_named(DESTROY, block)), default=None)
        for call in script.calls_named(r"^os\._exit$", block):
            if destroyed_at is None or destroyed_at > call.lineno:
                out.append(finding(script.path, call, "DD902", "os._exit()"))
    if inits and not _guarded(script):
        daemon_set = {dotted(t.value) for n in script.nodes if isinstance(n, ast.Assign)
                      for t in n.targets if isinstance(t, ast.Attribute) and t.attr == "daemon"}
        for call in script.calls_named(r"^threading\.Thread$"):
            daemon = next((k.value for k in call.keywords if k.arg == "daemon"), None)
            if isinstance(daemon, ast.Constant) and daemon.value:
                continue
            if daemon is not None and not isinstance(daemon, ast.Constant):
                continue  # decided at run time: cannot tell
            target = script.parents.get(call)
            if isinstance(target, ast.Assign) and any(dotted(t) in daemon_set for t in target.targets):
                continue
            out.append(finding(script.path, call, "DD903", "threading.Thread(daemon=False)"))
    return out
