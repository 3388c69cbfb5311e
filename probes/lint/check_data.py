"""Rules on which data each rank sees: samplers (DD501, DD502), accelerate's prepare (DD503),
Lightning's sampler switch (DD504), and seeds (DD601, DD602)."""
from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from .check_sync import in_rank_branch
from .model import Script, dotted
from .rules import Finding, finding

LOADER = r"(^|\.)DataLoader$"
EVAL_DATA = re.compile(r"val|eval|test|dev\b|valid", re.I)
SEEDS = (r"^torch\.manual_seed$|^torch\.cuda\.manual_seed(_all)?$|^random\.seed$|^numpy\.random\.seed$|"
         r"(^|\.)set_seed$|(^|\.)seed_everything$")
RANDOM_AUG = re.compile(r"(^|\.)(Random(?!\w*Sampler$)[A-Z]\w*|RandAugment|TrivialAugmentWide|AutoAugment|"
                        r"AugMix|ColorJitter|GaussianBlur|ElasticTransform)$")
RANDOM_DRAW = re.compile(r"^(random\.(random|randint|uniform|choice|shuffle|sample)|numpy\.random\.\w+|"
                         r"torch\.(rand|randn|randint|randperm|bernoulli))$")


def raw_distributed(script: Script) -> bool:
    """Plain torch.distributed (no framework that builds the sampler for it)."""
    framework = script.uses(r"^(lightning|pytorch_lightning|accelerate)\b|^transformers\.(Trainer|Seq2SeqTrainer)$")
    direct = any(script.calls_named(r"^torch\.distributed\.init_process_group$")) or script.uses(
        r"DistributedDataParallel|FullyShardedDataParallel|fully_shard")
    return direct and not framework


def _kw(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _false(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value in (False, None)


def _rank_only(script: Script, node: ast.AST) -> bool:
    """Inside a rank branch, or inside a function only called from rank branches."""
    if in_rank_branch(script, node):
        return True
    fn = script.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    if fn is None:
        return False
    sites = [c for c in script.calls() if script.local_callee(c) == fn.name]  # type: ignore[attr-defined]
    return bool(sites) and all(in_rank_branch(script, s) for s in sites)


def dataloader_without_sampler(script: Script) -> list[Finding]:
    """DD501: DataLoader with no sampler in plain DDP code (eval loaders, rank-0-only loaders and
    loaders over data already sharded by rank are fine); DD502: a shuffling DistributedSampler and
    no set_epoch anywhere."""
    out: list[Finding] = []
    if not raw_distributed(script):
        return out
    for call in script.calls_named(LOADER):
        if any(k.arg is None for k in call.keywords):
            continue  # DataLoader(ds, **kwargs): the sampler may be in there
        sampler = _kw(call, "sampler") or _kw(call, "batch_sampler")
        if sampler is not None and not _false(sampler):
            continue
        data = call.args[0] if call.args else _kw(call, "dataset")
        target = script.parents.get(call)
        label = ast.unparse(target.targets[0]) if isinstance(target, ast.Assign) else ""
        local = script.value_of(data) if isinstance(data, ast.Name) else None
        if data is None or script.per_rank(local if local is not None else data) or \
                EVAL_DATA.search(label + ast.unparse(data)):
            continue
        if _rank_only(script, call) or _iterable_dataset(script, data):
            continue
        out.append(finding(script.path, call, "DD501", f"DataLoader({ast.unparse(data)[:40]})"))
    if not any(isinstance(c.func, ast.Attribute) and c.func.attr == "set_epoch" for c in script.calls()):
        for call in script.calls_named(r"(^|\.)DistributedSampler$"):
            data = call.args[0] if call.args else _kw(call, "dataset")
            if data is not None and EVAL_DATA.search(ast.unparse(data)):
                continue  # evaluation order does not matter
            if not _false(_kw(call, "shuffle")) and not _escapes(script, call):
                out.append(finding(script.path, call, "DD502", "DistributedSampler"))
    return out


def _escapes(script: Script, sampler: ast.Call) -> bool:
    """Is the sampler handed to a function of another module (which may call set_epoch)?"""
    holder = script.parents.get(sampler)
    names = {n for t in getattr(holder, "targets", []) if isinstance(t, ast.Name) for n in [t.id]}
    for call in script.calls():
        if re.search(LOADER, script.qualname(call.func)):
            continue
        values = [*call.args, *(k.value for k in call.keywords)]
        if any(isinstance(v, ast.Name) and v.id in names for v in values):
            return True
    return False


def _iterable_dataset(script: Script, data: ast.AST) -> bool:
    """Streaming datasets shard themselves (split_dataset_by_node, IterableDataset subclasses)."""
    text = ast.unparse(data)
    if "split_dataset_by_node" in text or "streaming" in text:
        return True
    classes = {n.name for n in script.nodes if isinstance(n, ast.ClassDef)
               and any("IterableDataset" in dotted(b) for b in n.bases)}
    return any(c in text for c in classes)


def _loader_names(script: Script) -> dict[str, ast.AST]:
    """Names holding DataLoaders: assigned from DataLoader(...) or from a local function returning them."""
    factories = {name for name, defs in script.functions.items() for fn in defs
                 for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value is not None
                 and any(script.calls_named(LOADER, r.value))}
    names: dict[str, ast.AST] = {}
    for node in script.nodes:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            q = script.qualname(node.value.func)
            if re.search(LOADER, q) or script.local_callee(node.value) in factories:
                for t in node.targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            names.setdefault(n.id, node)
    return names


def _prepares(script: Script, root: ast.AST) -> Iterator[ast.Call]:
    for call in script.calls(root):
        if isinstance(call.func, ast.Attribute) and call.func.attr in ("prepare", "prepare_data_loader"):
            yield call


def accelerate_unprepared(script: Script) -> list[Finding]:
    """DD503: a DataLoader never passed to accelerator.prepare, or missing from the prepare call of
    one branch while the other branch's call has it."""
    if not script.uses(r"^accelerate\b"):
        return []
    loaders = _loader_names(script)
    prepared = {n.id for c in _prepares(script, script.tree) for a in c.args for n in ast.walk(a)
                if isinstance(n, ast.Name)}
    # an eval/test loader left out runs the full set on every process: redundant, not wrong
    out = [finding(script.path, node, "DD503", name) for name, node in loaders.items()
           if name not in prepared and not EVAL_DATA.search(name)]
    for node in script.nodes:
        if not isinstance(node, ast.If):
            continue
        arms = [list(_prepares(script, ast.Module(body=arm, type_ignores=[]))) for arm in (node.body, node.orelse)]
        if not all(arms):
            continue
        args = [{n.id for c in arm for a in c.args for n in ast.walk(a) if isinstance(n, ast.Name)} for arm in arms]
        for arm, mine, theirs in ((arms[0], args[0], args[1]), (arms[1], args[1], args[0])):
            missing = sorted(n for n in (theirs - mine) & set(loaders) if not EVAL_DATA.search(n))
            if missing:
                out.append(finding(script.path, arm[0], "DD503", ", ".join(missing)))
    return out


def lightning_sampler_off(script: Script) -> list[Finding]:
    """DD504: Trainer(use_distributed_sampler=<not True>) and no DistributedSampler of the script's own."""
    if not script.uses(r"^(lightning|pytorch_lightning)\b") or any(script.calls_named(r"DistributedSampler$")):
        return []
    out = []
    for call in script.calls_named(r"(^|\.)Trainer$"):
        for key in ("use_distributed_sampler", "replace_sampler_ddp"):
            value = _kw(call, key)
            if value is not None and not (isinstance(value, ast.Constant) and value.value is True):
                out.append(finding(script.path, value, "DD504", f"{key}={ast.unparse(value)}"))
    return out


def seeds(script: Script) -> list[Finding]:
    """DD601: one constant seed on every rank plus random augmentation; DD602: gradients averaged by
    hand with nothing making the initial weights equal."""
    out: list[Finding] = []
    distributed = raw_distributed(script) or script.uses(r"^(lightning|pytorch_lightning|accelerate)\b")
    seed_calls = list(script.calls_named(SEEDS))
    if distributed and _random_augmentation(script):
        for call in seed_calls:
            arg = call.args[0] if call.args else _kw(call, "seed")
            per_rank = arg is not None and script.per_rank(arg)
            handled = any(_kw(call, k) is not None and not _false(_kw(call, k))
                          for k in ("workers", "device_specific"))
            if not per_rank and not handled:
                out.append(finding(script.path, call, "DD601", dotted(call.func) + "()"))
                break
    manual = [c for c in script.calls_named(r"^torch\.distributed\.all_reduce$")
              if c.args and ".grad" in ast.unparse(c.args[0])]
    synced = script.uses(r"DistributedDataParallel|FullyShardedDataParallel|fully_shard") or any(
        script.calls_named(r"^torch\.distributed\.broadcast"))
    if manual and not synced and not seed_calls:
        out.append(finding(script.path, manual[0], "DD602", dotted(manual[0].func) + "(p.grad)"))
    return out


def _random_augmentation(script: Script) -> bool:
    if any(RANDOM_AUG.search(script.qualname(c.func)) for c in script.calls()):
        return True
    for defs in (script.functions.get("__getitem__", []), script.functions.get("__iter__", [])):
        for fn in defs:
            if any(RANDOM_DRAW.match(script.qualname(c.func)) and not _kw(c, "generator") for c in script.calls(fn)):
                return True
    return False
