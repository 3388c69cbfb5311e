"""Rules on where collectives sit: rank-only branches (DD101), rank-dependent exits (DD102), loops
over per-rank data (DD201), and heavy rank-0 work between collectives (DD801)."""
from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from .model import RANK_ZERO_DECORATORS, Script, dotted
from .rules import Finding, finding

EXITS = (ast.Return, ast.Break, ast.Continue)
HEAVY_CALL = re.compile(r"(^|[._])(evaluate\w*|validat\w*|export\w*|convert\w*|tokeniz\w*|generate|"
                        r"upload\w*|sleep|benchmark\w*|predict\w*|inference|cache_\w+|precompute\w*|preprocess\w*|"
                        r"download\w*)$|jit\.script$|onnx\.|subprocess\.")
DATA_ITER = re.compile(r"(loader|dataset|data|batches|_dl|dl|shards?|files|records|samples|examples)\b", re.I)


def rank_ifs(script: Script) -> list[ast.If]:
    """Every `if` whose condition differs between ranks (computed once per script)."""
    if "rank_ifs" not in script.memo:
        script.memo["rank_ifs"] = [n for n in script.nodes
                                   if isinstance(n, ast.If) and script.rank_dependent(n.test)]
    return script.memo["rank_ifs"]


def in_rank_branch(script: Script, node: ast.AST) -> bool:
    ids = {id(b) for b in rank_ifs(script)}
    cur = script.parents.get(node)
    while cur is not None:
        if id(cur) in ids:
            return True
        cur = script.parents.get(cur)
    return False


def rank_zero_functions(script: Script) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Functions the frameworks run on rank 0 only (`@rank_zero_only`, `@accelerator.on_main_process`)."""
    for defs in script.functions.values():
        for fn in defs:
            if any(RANK_ZERO_DECORATORS.search(dotted(d.func if isinstance(d, ast.Call) else d))
                   for d in fn.decorator_list):
                yield fn


def _subgroups(script: Script) -> set[str]:
    """Names of process groups made of some ranks only (`new_group(ranks=[0, 1])`,
    `collective.create_group(ranks=...)`): only their members call their collectives."""
    out: set[str] = set()
    for call in script.calls():
        if not (isinstance(call.func, ast.Attribute) and call.func.attr in ("new_group", "create_group")):
            continue
        if not (any(k.arg == "ranks" for k in call.keywords) or (call.args and isinstance(call.args[0], ast.List))):
            continue
        holder = script.parents.get(call)
        if call.func.attr == "create_group":
            out.add(dotted(call.func.value))
        elif isinstance(holder, ast.Assign):
            out.update(dotted(t) for t in holder.targets)
    return out


def _on_subgroup(script: Script, call: ast.Call, groups: set[str]) -> bool:
    group = next((k.value for k in call.keywords if k.arg == "group"), None)
    if group is not None and dotted(group) in groups:
        return True
    return isinstance(call.func, ast.Attribute) and dotted(call.func.value) in groups


def collective_in_rank_branch(script: Script) -> list[Finding]:
    """DD101: a collective on one side of a rank branch while the other side makes none (two sides
    that both make collectives are ranks in different roles, each with its own matching calls)."""
    out: list[Finding] = []
    seen: set[int] = set()
    groups = _subgroups(script)
    for node in rank_ifs(script):
        for arm, other in ((node.body, node.orelse), (node.orelse, node.body)):
            if any(next(script.collectives_in(s), None) for s in other):
                continue
            for stmt in arm:
                for call, name in script.collectives_in(stmt):
                    if _on_subgroup(script, call, groups):
                        continue
                    if id(call) not in seen:
                        seen.add(id(call))
                        out.append(finding(script.path, call, "DD101", name))
    for fn in rank_zero_functions(script):
        for stmt in fn.body:
            for call, name in script.collectives_in(stmt):
                if id(call) not in seen:
                    seen.add(id(call))
                    out.append(finding(script.path, call, "DD101", name))
    return out


def collective_after_rank_exit(script: Script) -> list[Finding]:
    """DD102: `if rank != 0: return` (or break/continue) before collectives the other ranks make."""
    out: list[Finding] = []
    for node in rank_ifs(script):
        for stmt in node.body + node.orelse:
            if not isinstance(stmt, EXITS):
                continue
            if isinstance(stmt, ast.Return):
                later = [c for s in script.following(node) for c in script.collectives_in(s)]
            else:
                loop = script.enclosing(node, (ast.For, ast.While, ast.AsyncFor))
                later = [c for s in (loop.body if loop else []) if s is not node
                         for c in script.collectives_in(s)] if loop else []
            if later:
                word = type(stmt).__name__.lower()
                out.append(finding(script.path, stmt, "DD102", f"{word} (then {later[0][1]})"))
    return out


def _loop_iterable(node: ast.AST) -> ast.AST:
    """`enumerate(loader)`, `tqdm(loader)`, `zip(a, b)` -> the data being iterated."""
    while isinstance(node, ast.Call) and node.args and dotted(node.func).split(".")[-1] in (
            "enumerate", "tqdm", "zip", "iter", "islice"):
        node = node.args[0]
    return node


def _joined(script: Script, node: ast.AST) -> bool:
    cur = script.parents.get(node)
    while cur is not None:
        if isinstance(cur, (ast.With, ast.AsyncWith)) and any(
                re.search(r"(Join|\.join)$", script.qualname(i.context_expr.func))
                for i in cur.items if isinstance(i.context_expr, ast.Call)):
            return True
        cur = script.parents.get(cur)
    return False


def collective_over_uneven_data(script: Script) -> list[Finding]:
    """DD201: a loop over data that differs per rank (no DistributedSampler), with collectives in it."""
    uses_ddp = any("DistributedDataParallel" in q or q.endswith(".DDP") for q in script.aliases.values())
    out: list[Finding] = []
    for loop in script.nodes:
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        data = _loop_iterable(loop.iter)
        if not _uneven(script, data) or _joined(script, loop):
            continue
        found = [c for s in loop.body for c in script.collectives_in(s)]
        if not found and uses_ddp:
            found = [(c, "DDP backward (gradient all-reduce)") for s in loop.body for c in script.calls(s)
                     if isinstance(c.func, ast.Attribute) and c.func.attr == "backward"]
        if found:
            out.append(finding(script.path, found[0][0], "DD201", found[0][1]))
    return out


def _uneven(script: Script, data: ast.AST) -> bool:
    """Can this iterable hold a different number of items on each rank? A DataLoader, dataset or
    slice whose value comes from the rank, without a DistributedSampler evening it out."""
    if isinstance(data, ast.Name):
        values = [v for targets, v in script._assignments() if data.id in targets]
        named = bool(DATA_ITER.search(data.id))
        return any((named or isinstance(v, ast.Subscript)) and script.per_rank(v) and not _even(script, v)
                   for v in values)
    if isinstance(data, ast.Subscript):
        return script.per_rank(data) and not _even(script, data)
    if isinstance(data, ast.Call):  # a call with the rank in it yields data only if named so
        return bool(DATA_ITER.search(dotted(data.func).rsplit(".", 1)[-1])) and script.per_rank(data) \
            and not _even(script, data)
    return False


def _even(script: Script, value: ast.AST) -> bool:
    """Does a DistributedSampler give every rank the same count (inline, through `sampler=` or in
    the local function that builds the loader)?"""
    if "DistributedSampler" in ast.unparse(value):
        return True
    if not isinstance(value, ast.Call):
        return False
    for kw in value.keywords:
        if kw.arg in ("sampler", "batch_sampler") and isinstance(kw.value, ast.Name):
            if any(kw.value.id in t and "DistributedSampler" in ast.unparse(v) for t, v in script._assignments()):
                return True
    callee = script.local_callee(value)
    return bool(callee) and any("DistributedSampler" in ast.unparse(fn) for fn in script.functions[callee])


def _heavy(script: Script, stmts: list[ast.stmt], depth: int = 0) -> str | None:
    for stmt in stmts:
        for node in script.walk_local(stmt):
            if isinstance(node, (ast.For, ast.AsyncFor)) and DATA_ITER.search(ast.unparse(_loop_iterable(node.iter))):
                return f"a loop over {ast.unparse(_loop_iterable(node.iter))[:40]}"
            if isinstance(node, ast.Call):
                name = script.qualname(node.func)
                if HEAVY_CALL.search(name):
                    return dotted(node.func) + "()"
                callee = script.local_callee(node)
                if callee and depth < 3:
                    for fn in script.functions[callee]:
                        if _heavy(script, fn.body, depth + 1):
                            return f"{callee}()"
    return None


def _timeout_raised(script: Script) -> bool:
    """A process-group timeout of 30 minutes or more written as a literal anywhere."""
    for call in script.calls():
        for kw in call.keywords:
            if kw.arg in ("timeout", "ddp_timeout") and _seconds(kw.value) >= 1800:
                return True
    return False


def _seconds(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.Call) and dotted(node.func).endswith("timedelta"):
        scale = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400}
        total = 0.0
        for kw in node.keywords:
            if kw.arg in scale and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, (int, float)):
                total += scale[kw.arg] * kw.value.value
        if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, (int, float)):
            total += 86400 * node.args[0].value
        return total
    return 0.0


def rank0_heavy_work(script: Script) -> list[Finding]:
    """DD801: eval/export/tokenising on rank 0 only, inside a loop or before another collective,
    in a script that never raised its timeout for it."""
    if _timeout_raised(script):
        return []
    distributed = any(script.collectives_in(script.tree)) or script.uses(
        r"torch\.distributed|lightning|accelerate|transformers\.Trainer|DistributedDataParallel")
    if not distributed:
        return []
    out: list[Finding] = []
    for node in rank_ifs(script):
        heavy = _heavy(script, node.body)
        if not heavy or any(next(script.collectives_in(s), None) for s in node.body):
            continue  # a collective in the branch is DD101's finding, not this one
        fn = script.function_of(node)
        hook = isinstance(script.parents.get(fn), ast.ClassDef)
        # between collectives: here, or where the function holding this branch is called
        sites: list[ast.AST] = [node]
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            sites += [c for c in script.calls() if script.local_callee(c) == fn.name]
        if hook or any(_between_collectives(script, site) for site in sites):
            out.append(finding(script.path, node, "DD801", heavy))
    return out


def _between_collectives(script: Script, node: ast.AST) -> bool:
    """Inside a loop of its function, or followed by a collective in it."""
    if script.enclosing(node, (ast.For, ast.While, ast.AsyncFor)) is not None:
        return True
    stmt = node
    while not isinstance(stmt, ast.stmt) and stmt is not None:
        stmt = script.parents.get(stmt)
    return stmt is not None and any(next(script.collectives_in(s), None) for s in script.following(stmt))
