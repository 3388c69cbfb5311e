"""What the lint rules know about one script: import aliases, local functions, rank-dependent names,
collective calls and DataLoaders, read from its `ast` without importing it."""
from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .names import (
    DIST_COLLECTIVES,
    DIST_RECEIVER,
    METHOD_COLLECTIVES,
    NO_TAINT_CALLS,
    PER_PROCESS,
    RANK_ATTRS,
    RANK_ENV,
    RANK_FUNCS,
    RANK_NAME,
    RANK_ZERO_DECORATORS,
    TORCHRUN_ENV,
    WEAK_COLLECTIVES,
    bound_names,
    dotted,
    env_key,
)

__all__ = ["RANK_ZERO_DECORATORS", "TORCHRUN_ENV", "Script", "dotted", "env_key"]


@dataclass
class Script:
    """One parsed file and the facts every rule shares."""

    path: str
    tree: ast.Module
    aliases: dict[str, str] = field(default_factory=dict)
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = field(default_factory=dict)
    rank_names: set[str] = field(default_factory=set)
    per_rank_names: set[str] = field(default_factory=set)
    collective_funcs: dict[str, ast.Call] = field(default_factory=dict)
    fsdp: bool = False
    # walked once: every rule asks for calls and assignments many times
    all_calls: list[ast.Call] = field(default_factory=list)
    assigns: list[tuple[list[str], ast.AST]] = field(default_factory=list)
    memo: dict[str, Any] = field(default_factory=dict)
    nodes: list[ast.AST] = field(default_factory=list)
    _qualnames: dict[int, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, path: str, text: str) -> Script:
        script = cls(path, ast.parse(text, filename=path))
        script._index()
        return script

    # ---- names -------------------------------------------------------------------------------
    def qualname(self, node: ast.AST) -> str:
        """The dotted name with its first part resolved through the imports (dist -> torch.distributed)."""
        known = self._qualnames.get(id(node))
        if known is not None:
            return known
        name = dotted(node)
        head, _, rest = name.partition(".")
        base = self.aliases.get(head.replace("()", ""), head)
        result = (f"{base}.{rest}" if rest else base) if name else ""
        self._qualnames[id(node)] = result
        return result

    def uses(self, pattern: str) -> bool:
        """Does any imported module or name match `pattern` (a regex on the qualified name)?"""
        return any(re.search(pattern, q) for q in self.aliases.values())

    def calls(self, root: ast.AST | None = None) -> Iterator[ast.Call]:
        if root is None or root is self.tree:
            yield from self.all_calls
            return
        for node in ast.walk(root):
            if isinstance(node, ast.Call):
                yield node

    def calls_named(self, pattern: str, root: ast.AST | None = None) -> Iterator[ast.Call]:
        rx = re.compile(pattern)
        for call in self.calls(root):
            if rx.search(self.qualname(call.func)):
                yield call

    # ---- rank dependence -----------------------------------------------------------------------
    def is_rank_ref(self, node: ast.AST, names: set[str] | None = None) -> bool:
        """Is this single node a rank (a rank name, a rank-zero helper, get_rank(), $RANK)?"""
        names = self.rank_names if names is None else names
        if isinstance(node, ast.Name):
            return (node.id in names or bool(RANK_NAME.match(node.id))) and not self._loop_var(node)
        if isinstance(node, ast.Attribute):
            return node.attr in RANK_ATTRS
        if isinstance(node, ast.Call):
            if self.qualname(node.func) in RANK_FUNCS:
                return True
            if isinstance(node.func, ast.Attribute) and node.func.attr in RANK_ATTRS | {"get_rank", "get_local_rank"}:
                return True
        # `"RANK" in os.environ` asks how the job was launched: the same answer on every rank
        return not isinstance(node, ast.Compare) and env_key(node) in RANK_ENV

    def _loop_var(self, name: ast.Name) -> bool:
        """`for rank in range(world)`: a loop over every rank, the same on each process."""
        fn = self.function_of(name)
        key = f"loopvars:{id(fn)}"
        if key not in self.memo:
            self.memo[key] = {n for node in self.walk_local(fn) if isinstance(node, (ast.For, ast.comprehension))
                              for n in bound_names(node.target)}
        return name.id in self.memo[key]

    def rank_dependent(self, expr: ast.AST) -> bool:
        """Does a branch condition differ between ranks? `local_rank == -1` and `rank is None` ask
        whether the job is distributed at all, the same answer everywhere: they do not count."""
        for node in ast.walk(expr):
            if isinstance(node, ast.Compare) and self._uniform_compare(node):
                continue
            if self.is_rank_ref(node) and not self._inside_uniform_compare(node, expr):
                return True
        return False

    def _uniform_compare(self, node: ast.Compare) -> bool:
        right = node.comparators[-1]
        if any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            return True
        return (isinstance(right, ast.UnaryOp) and isinstance(right.op, ast.USub)
                and isinstance(right.operand, ast.Constant) and right.operand.value == 1)

    def _inside_uniform_compare(self, node: ast.AST, top: ast.AST) -> bool:
        cur = self.parents.get(node)
        while cur is not None:
            if isinstance(cur, ast.Compare) and self._uniform_compare(cur):
                return True
            if cur is top:
                return False
            cur = self.parents.get(cur)
        return False

    def per_rank(self, expr: ast.AST) -> bool:
        """Does a value differ between ranks (a path or dataset built from the rank, or from a
        value unique to each process: a temporary folder, a uuid, the pid)? A local function
        called with the rank counts only if its body uses the rank."""
        if isinstance(expr, ast.Call):
            name = self.qualname(expr.func) or "x"
            if PER_PROCESS.search(name):
                return True
            if self.is_rank_ref(expr, self.per_rank_names):
                return True
            if NO_TAINT_CALLS.search(name):
                return False
            callee = self.local_callee(expr)
            if callee is not None:
                passed = any(self.per_rank(a) for a in [*expr.args, *(k.value for k in expr.keywords)])
                return (passed and self._uses_rank(callee)) or self.per_rank(expr.func)
        elif self.is_rank_ref(expr, self.per_rank_names):
            return True
        return any(self.per_rank(child) for child in ast.iter_child_nodes(expr))

    def _uses_rank(self, callee: str) -> bool:
        """Does a local function read a rank (a parameter named so, get_rank(), $RANK) anywhere?"""
        key = f"uses_rank:{callee}"
        if key not in self.memo:
            self.memo[key] = any(self.is_rank_ref(n, set()) for fn in self.functions[callee]
                                 for n in self.walk_local(fn) if not isinstance(n, ast.arg))
        return bool(self.memo[key])

    def value_of(self, name: ast.Name) -> ast.AST | None:
        """The value last assigned to `name` before its use in the same block or an enclosing one
        (so `ds` in one arm of an if/elif is the `ds` of that arm, not of another)."""
        cur: ast.AST = name
        while (parent := self.parents.get(cur)) is not None:
            for block in ("body", "orelse", "finalbody"):
                stmts = getattr(parent, block, None)
                if isinstance(stmts, list) and cur in stmts:
                    for stmt in reversed(stmts[:stmts.index(cur)]):
                        if isinstance(stmt, ast.Assign) and any(
                                isinstance(t, ast.Name) and t.id == name.id for t in stmt.targets):
                            return stmt.value
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return None
            cur = parent
        return None

    # ---- collectives -------------------------------------------------------------------------
    def collective(self, call: ast.Call) -> str | None:
        """The collective a call makes (as written), or None."""
        q = self.qualname(call.func)
        short = q.rsplit(".", 1)[-1]
        if (q.startswith("torch.distributed.") and short in DIST_COLLECTIVES) or \
                re.match(r"accelerate\.utils(\.operations)?\.(gather|reduce|broadcast|broadcast_object_list|"
                         r"gather_object|pad_across_processes|wait_for_everyone)$", q):
            return dotted(call.func)
        if isinstance(call.func, ast.Attribute):
            attr = call.func.attr
            receiver = self.qualname(call.func.value)
            if attr in METHOD_COLLECTIVES and receiver.split(".")[0] not in ("np", "numpy", "math"):
                return dotted(call.func)
            if attr in WEAK_COLLECTIVES and DIST_RECEIVER.search(receiver):
                return dotted(call.func)
            if attr == "save_checkpoint" and re.search(r"(^|\.)trainer$", receiver):
                return dotted(call.func)  # Lightning: ends in strategy.barrier, every rank must call it
            if attr == "save_state" and re.search(r"(^|\.)accelerator$", receiver):
                return dotted(call.func)
            if attr in ("state_dict", "full_optim_state_dict") and self.fsdp and re.search(r"model", receiver):
                return dotted(call.func) + " (FSDP all-gather)"
            if attr == "save_pretrained" and self.fsdp and not any(k.arg == "state_dict" for k in call.keywords):
                return dotted(call.func) + " (its state_dict() is an FSDP all-gather)"
            if attr in ("log", "log_dict") and any(
                    k.arg == "sync_dist" and not (isinstance(k.value, ast.Constant) and not k.value.value)
                    for k in call.keywords):
                return dotted(call.func) + "(sync_dist=True)"
        return None

    def collectives_in(self, root: ast.AST, follow: bool = True) -> Iterator[tuple[ast.Call, str]]:
        """Collectives in a subtree (not inside nested defs), and calls of local functions that
        make one, named `f() -> inner`."""
        for node in self.walk_local(root):
            if not isinstance(node, ast.Call):
                continue
            name = self.collective(node)
            if name:
                yield node, name
            elif follow and (callee := self.local_callee(node)) in self.collective_funcs:
                inner = self.collective_funcs[callee]
                yield node, f"{callee}() -> {dotted(inner.func)} (line {inner.lineno})"

    def local_callee(self, call: ast.Call) -> str | None:
        """The name of the local function or method a call reaches (`f()`, `self.f()`)."""
        func = call.func
        if isinstance(func, ast.Name) and func.id in self.functions:
            return func.id
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls") \
                and func.attr in self.functions:
            return func.attr
        return None

    @staticmethod
    def walk_local(root: ast.AST) -> Iterator[ast.AST]:
        """ast.walk that does not enter nested function, class or lambda bodies."""
        todo = [root]
        while todo:
            node = todo.pop()
            yield node
            for child in ast.iter_child_nodes(node):
                if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                    todo.append(child)

    # ---- structure ---------------------------------------------------------------------------
    def enclosing(self, node: ast.AST, kinds: tuple[type, ...]) -> ast.AST | None:
        cur = self.parents.get(node)
        while cur is not None and not isinstance(cur, kinds):
            cur = self.parents.get(cur)
        return cur

    def function_of(self, node: ast.AST) -> ast.AST:
        return self.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or self.tree

    def following(self, stmt: ast.stmt) -> Iterator[ast.stmt]:
        """Statements that run after `stmt` in its function: later siblings, then those of each
        enclosing block (a loop's own body is not repeated here)."""
        cur: ast.AST = stmt
        while True:
            parent = self.parents.get(cur)
            if parent is None or isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
                body = getattr(parent, "body", []) if parent is not None else []
                yield from body[body.index(cur) + 1:] if cur in body else []
                return
            for name in ("body", "orelse", "finalbody", "handlers"):
                block = getattr(parent, name, None)
                if isinstance(block, list) and cur in block:
                    yield from block[block.index(cur) + 1:]
            cur = parent

    # ---- indexing ----------------------------------------------------------------------------
    def _index(self) -> None:
        for node in self._walk_once():
            if isinstance(node, ast.Call):
                self.all_calls.append(node)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, []).append(node)
        self.assigns = list(self._walk_assignments())
        self.fsdp = self.uses(r"FullyShardedDataParallel|fully_shard|\.FSDP$")
        self._taint()
        self._collective_functions()

    def _walk_once(self) -> list[ast.AST]:
        """Every node, parents recorded on the way (one pass instead of ast.walk + iter_child_nodes)."""
        nodes: list[ast.AST] = []
        stack: list[ast.AST] = [self.tree]
        parents = self.parents
        while stack:
            node = stack.pop()
            nodes.append(node)
            children: list[ast.AST] = []
            for name in node._fields:
                value = getattr(node, name, None)
                if isinstance(value, ast.AST):
                    children.append(value)
                elif isinstance(value, list):
                    children.extend(item for item in value if isinstance(item, ast.AST))
            for child in children:
                parents[child] = node
            stack.extend(reversed(children))  # popped in source order: "the first X" is the first written
        self.nodes = nodes
        return nodes

    def _assignments(self) -> list[tuple[list[str], ast.AST]]:
        return self.assigns

    def _walk_assignments(self) -> Iterator[tuple[list[str], ast.AST]]:
        for node in self.nodes:
            if isinstance(node, ast.Assign):
                yield [n for t in node.targets for n in bound_names(t)], node.value
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
                yield bound_names(node.target), node.value
            elif isinstance(node, (ast.For, ast.comprehension)):
                yield bound_names(node.target), node.iter

    def _taint(self) -> None:
        """Names that hold a rank (for branch conditions: only through comparisons and arithmetic)
        and names whose value differs by rank (for paths and datasets: through any expression)."""
        assigns = self.assigns
        for _ in range(6):
            before = (len(self.rank_names), len(self.per_rank_names))
            for targets, value in assigns:
                if self._narrow_rank_value(value):
                    self.rank_names.update(targets)
                if self.per_rank(value):
                    self.per_rank_names.update(targets)
            if before == (len(self.rank_names), len(self.per_rank_names)):
                break

    def _narrow_rank_value(self, value: ast.AST) -> bool:
        if isinstance(value, ast.Call):
            if isinstance(value.func, ast.Name) and value.func.id in ("int", "str", "bool") and value.args:
                return self._narrow_rank_value(value.args[0])
            return self.is_rank_ref(value)
        if isinstance(value, ast.IfExp):
            return self.rank_dependent(value.test) or any(
                self._narrow_rank_value(v) for v in (value.body, value.orelse))
        if isinstance(value, ast.BinOp):
            return self._narrow_rank_value(value.left) or self._narrow_rank_value(value.right)
        if isinstance(value, (ast.Compare, ast.BoolOp, ast.UnaryOp)):
            return self.rank_dependent(value)
        return isinstance(value, (ast.Name, ast.Attribute, ast.Subscript)) and self.is_rank_ref(value)

    def _collective_functions(self) -> None:
        """Local functions that make a collective, directly or through other local functions."""
        direct: dict[str, ast.Call] = {}
        callees: dict[str, list[str]] = {}
        for name, defs in self.functions.items():
            for fn in defs:
                for node in self.walk_local(fn):
                    if not isinstance(node, ast.Call):
                        continue
                    if self.collective(node):
                        direct.setdefault(name, node)
                    elif (callee := self.local_callee(node)) is not None:
                        callees.setdefault(name, []).append(callee)
        found = dict(direct)
        changed = True
        while changed:
            changed = False
            for name, called in callees.items():
                if name not in found:
                    hit = next((found[c] for c in called if c in found), None)
                    if hit is not None:
                        found[name] = hit
                        changed = True
        self.collective_funcs = found

