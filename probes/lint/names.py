"""Names the lint rules recognise: collectives, rank helpers, environment variables, and small
helpers that read names out of `ast` nodes."""
from __future__ import annotations

import ast
import re

# torch.distributed calls every rank of the group must make
DIST_COLLECTIVES = frozenset((
    "all_reduce", "all_gather", "all_gather_object", "all_gather_into_tensor", "reduce_scatter",
    "reduce_scatter_tensor", "broadcast", "broadcast_object_list", "reduce", "gather", "gather_object",
    "scatter", "scatter_object_list", "barrier", "monitored_barrier", "all_to_all", "all_to_all_single",
    "new_group", "new_subgroups"))
# method names that are collectives whatever object they are called on (accelerate, Lightning, Fabric)
METHOD_COLLECTIVES = frozenset((
    "all_reduce", "all_gather", "all_gather_object", "all_gather_into_tensor", "broadcast_object_list",
    "barrier", "wait_for_everyone", "gather_for_metrics", "reduce_scatter", "reduce_scatter_tensor",
    "all_to_all", "all_to_all_single", "monitored_barrier", "gather_object", "scatter_object_list",
    "pad_across_processes"))
# ambiguous method names (tensor.gather, functools.reduce): collectives only on a distributed object
WEAK_COLLECTIVES = frozenset(("gather", "reduce", "broadcast"))
DIST_RECEIVER = re.compile(r"(^|\.)(accelerator|fabric|strategy|xm|hvd)$|^torch\.distributed$|^accelerate\.")
# rank-zero helpers of the frameworks, and the usual names for a rank
RANK_ATTRS = frozenset((
    "rank", "local_rank", "global_rank", "node_rank", "world_rank", "is_global_zero", "is_main_process",
    "is_local_main_process", "is_world_process_zero", "is_local_process_zero", "process_index",
    "local_process_index", "should_save", "is_master", "master_process", "is_last_process",
    "is_rank_zero", "is_main"))
RANK_NAME = re.compile(r"^(local_|global_|world_|node_|my_|ddp_|ddp_local_|dp_|tp_|pp_)?rank$|^is_(main|master)(_process)?$"
                       r"|^(master|main)_process$|^is_rank_?(zero|0)$|^is_(global|local)_zero$")
RANK_ENV = frozenset(("RANK", "LOCAL_RANK", "GROUP_RANK", "NODE_RANK", "SLURM_PROCID", "SLURM_LOCALID",
                      "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK"))
TORCHRUN_ENV = frozenset(("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                          "TORCHELASTIC_RUN_ID"))
RANK_FUNCS = frozenset(("torch.distributed.get_rank", "torch.distributed.get_node_local_rank",
                        "torch.distributed.get_global_rank"))
RANK_ZERO_DECORATORS = re.compile(r"(^|\.)(rank_zero_only|on_main_process|on_local_main_process|"
                                  r"main_process_only|on_process|on_local_process)$")
PER_PROCESS = re.compile(r"^(tempfile\.(mkdtemp|mkstemp|TemporaryDirectory|NamedTemporaryFile)|uuid\.uuid[14]|"
                         r"os\.getpid)$")
# calls that keep per-rank values out of what they return (devices, samplers of equal length)
NO_TAINT_CALLS = re.compile(r"(^|\.)(to|cuda|device|set_device|DistributedSampler|"
                            r"DistributedDataParallel|DDP|print|info|warning|debug|log)$")


def dotted(node: ast.AST) -> str:
    """`a.b.c` for a Name/Attribute chain (calls in the chain shown as `()`), '' otherwise."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            break
        elif isinstance(node, ast.Call):
            parts.append("()")
            node = node.func
        else:
            return ""
    return ".".join(reversed(parts)).replace(".()", "()")


def env_key(node: ast.AST) -> str | None:
    """The variable name of `os.environ["X"]`, `os.environ.get("X")`, `os.getenv("X")`, `"X" in os.environ`."""
    if isinstance(node, ast.Subscript) and dotted(node.value).endswith("environ"):
        key = node.slice
    elif isinstance(node, ast.Call) and re.search(r"(environ\.get|getenv)$", dotted(node.func)) and node.args:
        key = node.args[0]
    elif (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn))
          and dotted(node.comparators[0]).endswith("environ")):
        key = node.left
    else:
        return None
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def bound_names(target: ast.AST) -> list[str]:
    """Names an assignment binds: `a`, `a, (b, *c)`; not `args` in `args.rank = ...` or `d[k] = ...`
    (the object is changed, not rebound)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in bound_names(elt)]
    if isinstance(target, ast.Starred):
        return bound_names(target.value)
    return []
