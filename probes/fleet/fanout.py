"""Fan-out: `distdoctor collect` (or `stacks`) on many nodes through ssh, kubectl exec (or here);
results and failures per host."""
from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distdoctor.knowledge.atomicfile import write_atomic
from distdoctor.knowledge.errors import InputError
from distdoctor.knowledge.i18n import t

from ..runner import CommandResult, Runner, SubprocessRunner
from .hosts import safe_name, ssh_destination
from .schema import NUMBER_HOOKS, SCHEMA_ID, bounds_problem, json_cut_short, validate_snapshot

VIAS = ("srun", "ssh", "pdsh", "kubectl", "local")


@dataclass
class HostResult:
    """One host's outcome: its snapshot document when ok, otherwise the reason it has none."""

    host: str
    ok: bool
    reason: str = ""
    duration_s: float = 0.0
    doc: dict[str, Any] | None = field(default=None, repr=False)
    file: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "ok": self.ok, "reason": self.reason,
                "duration_s": round(self.duration_s, 3), "file": self.file}


@dataclass(frozen=True)
class FanoutOptions:
    """What to run where. `timeout` is per host (ssh) or per command (pdsh -u, srun step)."""

    via: str
    hosts: tuple[str, ...] = ()
    timeout: float = 60.0
    concurrency: int = 32
    python: str | None = None
    distdoctor: str = "distdoctor"
    action: str = "collect"  # or "stacks": `distdoctor stacks --job auto --json` on each node
    extra: tuple[str, ...] = ()  # more arguments for the action (stacks: --native)
    selector: str = ""  # kubectl: the pods' label selector
    namespace: str = ""
    container: str = ""

    @property
    def connect_timeout(self) -> int:
        return max(1, min(10, int(self.timeout)))


OnHost = Callable[[HostResult, int, int], None]


def collect_command(opts: FanoutOptions) -> list[str]:
    """The command each node runs: `distdoctor collect [--python PATH]` or `distdoctor stacks
    --job auto --json` (JSON on stdout)."""
    if opts.action == "stacks":
        job = [] if "--job" in opts.extra else ["--job", "auto"]
        return [opts.distdoctor, "stacks", *job, "--json", *opts.extra]
    argv = [opts.distdoctor, "collect"]
    if opts.python:
        argv += ["--python", opts.python]
    return argv


def ssh_argv(host: str, opts: FanoutOptions) -> list[str]:
    """ssh never prompts (BatchMode) and gives up connecting after connect_timeout seconds."""
    return ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={opts.connect_timeout}",
            *ssh_destination(host), shlex.join(collect_command(opts))]


def parse_output(text: str) -> tuple[dict[str, Any] | None, str]:
    """A snapshot from a node's stdout, or None and why it is not one."""
    text = text.strip()
    if not text:
        return None, "no output"
    try:
        doc = json.loads(text, **NUMBER_HOOKS)
    except RecursionError:
        return None, "bad output: JSON nested deeper than the parser's stack allows"
    except json.JSONDecodeError:
        start = text.find("\n{")
        if start >= 0:  # a login banner or a shell rc file printed something first
            return parse_output(text[start + 1:])
        if json_cut_short(text):
            return None, "bad output: the JSON is cut short"
        first = text.splitlines()[0][:120]
        return None, t("bad output, not a snapshot: {first}", first=repr(first))
    # the whole document, raw probe outputs included: no number Python cannot use, no deep nesting
    bad = bounds_problem(doc, max_str=1 << 24, max_items=1 << 20, max_depth=64)
    if bad:
        return None, t("bad output: {bad}", bad=bad)
    if is_stacks_doc(doc):
        return doc, ""
    if isinstance(doc, dict) and doc.get("schema") not in (None, SCHEMA_ID):
        return None, t("the node's distdoctor writes {schema}, this one reads {ours}", schema=doc.get("schema"), ours=SCHEMA_ID)
    problems = validate_snapshot(doc)
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return None, t("invalid snapshot: {problem}{more}", problem=problems[0], more=more)
    return doc, ""


def is_stacks_doc(doc: Any) -> bool:
    """A `distdoctor stacks --json` document (fleet stacks), not a snapshot."""
    return (isinstance(doc, dict) and "schema" not in doc and isinstance(doc.get("ranks"), list)
            and isinstance(doc.get("groups"), list) and isinstance(doc.get("odd"), list))


def answered(opts: FanoutOptions) -> tuple[int, ...]:
    """Exit codes that still carry an answer: `stacks` exits 1 when it found odd ranks."""
    return (0, 1) if opts.action == "stacks" else (0,)


def failure_reason(res: CommandResult, tool: str) -> str:
    """Why a command gave no snapshot: its own error, or the last line it wrote to stderr."""
    if res.error:
        return res.error
    lines = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()
             # kubectl exec adds this after the command's own last word, which says more
             and not (tool == "kubectl" and ln.startswith("command terminated with exit code"))]
    # a host's bytes go to the terminal: keep them printable (no escape sequences, no binary)
    last = "".join(c if c.isprintable() else "?" for c in lines[-1][:300]) if lines else ""
    if res.returncode == 255 and tool == "ssh":
        return t("ssh failed (exit 255): {error}", error=last or t("connection error"))
    if res.returncode == 127:
        return t("exit code 127: {error} (install distdoctor there or pass --distdoctor PATH)",
                 error=last or t("command not found"))
    return t("exit code {code}", code=res.returncode) + (f": {last}" if last else "")


def _one(host: str, argv: list[str], tool: str, opts: FanoutOptions, runner: Runner) -> HostResult:
    start = time.monotonic()
    res = runner(argv, timeout=opts.timeout)
    took = time.monotonic() - start
    if res.error or res.returncode not in answered(opts):
        # a stacks answer that exits 1 still prints its JSON; any other exit has none
        return HostResult(host, False, failure_reason(res, tool), took)
    doc, reason = parse_output(res.stdout)
    if doc is None and res.returncode:
        reason = failure_reason(res, tool)
    return HostResult(host, doc is not None, reason, took, doc)


def fan_out_ssh(opts: FanoutOptions, runner: Runner | None = None,
                on_host: OnHost | None = None) -> list[HostResult]:
    """One ssh per host, at most `concurrency` at once, each killed (its whole process group)
    after `timeout` seconds. Results in host-list order."""
    return _fan_out_each(list(opts.hosts), lambda h: ssh_argv(h, opts), "ssh", opts,
                         runner or SubprocessRunner(), on_host)


def _fan_out_each(hosts: list[str], argv_of: Callable[[str], list[str]], tool: str,
                  opts: FanoutOptions, runner: Runner, on_host: OnHost | None) -> list[HostResult]:
    """One command per host through `tool`, at most `concurrency` at once."""
    results: dict[str, HostResult] = {}
    pool = ThreadPoolExecutor(max_workers=max(1, min(opts.concurrency, len(hosts) or 1)),
                              thread_name_prefix=f"fleet-{tool}")
    try:
        futures = {pool.submit(_one, host, argv_of(host), tool, opts, runner): host for host in hosts}
        for future in as_completed(futures):
            host = futures[future]
            try:
                result = future.result()
            except Exception as exc:  # a runner bug is this host's failure, not the fan-out's
                result = HostResult(host, False, f"{type(exc).__name__}: {exc}")
            results[host] = result
            if on_host:
                on_host(result, len(results), len(hosts))
    except KeyboardInterrupt:
        # start no more hosts; the running ones end at their own timeout at the latest
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return [results[h] for h in hosts]


class KubectlError(InputError, ValueError):
    """The pods could not be listed; the message is one line."""


def _kubectl_scope(opts: FanoutOptions) -> list[str]:
    return ["--namespace", opts.namespace] if opts.namespace else []


def kubectl_pods_argv(opts: FanoutOptions) -> list[str]:
    """`kubectl get pods -l SELECTOR -o name`, running pods only (exec needs a running one)."""
    return ["kubectl", "get", "pods", *_kubectl_scope(opts), "-l", opts.selector,
            "--field-selector=status.phase=Running", "-o", "name",
            f"--request-timeout={opts.connect_timeout}s"]


def kubectl_argv(pod: str, opts: FanoutOptions) -> list[str]:
    """`kubectl exec [-n NS] POD [-c C] -- distdoctor collect|stacks ...` (no tty, no stdin)."""
    container = ["--container", opts.container] if opts.container else []
    return ["kubectl", "exec", *_kubectl_scope(opts), pod, *container, "--",
            *collect_command(opts)]


def kubectl_pods(opts: FanoutOptions, runner: Runner) -> list[str]:
    """The names of the running pods the selector matches; KubectlError when kubectl cannot say."""
    res = runner(kubectl_pods_argv(opts), timeout=max(10.0, opts.connect_timeout + 5.0))
    if res.error or res.returncode != 0:
        raise KubectlError(t("kubectl get pods -l {selector}: {error}", selector=opts.selector,
                             error=failure_reason(res, "kubectl")))
    pods = [line.strip().removeprefix("pod/") for line in res.stdout.splitlines() if line.strip()]
    if not pods:
        where = f" in namespace {opts.namespace}" if opts.namespace else ""
        raise KubectlError(t("no running pod matches -l {selector}{where} (see `kubectl get pods -l {selector} {scope}`)",
                             selector=opts.selector, where=where, scope=" ".join(_kubectl_scope(opts))))
    return pods


def fan_out_kubectl(opts: FanoutOptions, runner: Runner | None = None,
                    on_host: OnHost | None = None) -> list[HostResult]:
    """`kubectl exec` into every running pod the selector matches, as ssh does into hosts: at
    most `concurrency` at once, each killed after `timeout`. Results are named by pod."""
    runner = runner or SubprocessRunner()
    pods = kubectl_pods(opts, runner)
    return _fan_out_each(pods, lambda pod: kubectl_argv(pod, opts), "kubectl", opts, runner, on_host)


def local_argv(opts: FanoutOptions) -> list[str]:
    """This node's command, run by this very distdoctor (no PATH lookup needed)."""
    return [sys.executable, "-m", "distdoctor.tui.cli", *collect_command(opts)[1:]]


def stacks_local(opts: FanoutOptions, runner: Runner | None = None,
                 on_host: OnHost | None = None) -> list[HostResult]:
    """`stacks` on this node only, as a host of the fan-out."""
    from ..stacks import hostname

    return _fan_out_each([hostname()], lambda _: local_argv(opts), "distdoctor", opts,
                         runner or SubprocessRunner(), on_host)


def collect_local(opts: FanoutOptions, on_host: OnHost | None = None) -> list[HostResult]:
    """This node only, in process."""
    from ..base import ProbeContext
    from .snapshot import SnapshotError, snapshot

    start = time.monotonic()
    ctx = ProbeContext(python=opts.python) if opts.python else ProbeContext()
    try:
        doc = snapshot(ctx)
    except SnapshotError as exc:
        result = HostResult("localhost", False, str(exc), time.monotonic() - start)
    else:
        result = HostResult(doc["host"], True, "", time.monotonic() - start, doc)
    if on_host:
        on_host(result, 1, 1)
    return [result]


def write_results(results: Sequence[HostResult], out_dir: Path) -> None:
    """Write each ok host's snapshot to OUT_DIR/<host>.json (atomically); sets `.file`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    used: set[str] = set()
    for result in results:
        if not result.ok or result.doc is None:
            continue
        name = safe_name(result.host)
        stem, n = name, 1
        while name in used:
            n += 1
            name = f"{stem}-{n}"
        used.add(name)
        path = out_dir / f"{name}.json"
        write_atomic(path, json.dumps(result.doc, indent=1) + "\n")
        result.file = str(path)


