"""Fan-out in one command: pdsh (`host: line` output) and a Slurm srun step (`task: line` output)."""
from __future__ import annotations

import math
import re
import shlex
import time
from collections import defaultdict
from collections.abc import Mapping

from distdoctor.knowledge.errors import InputError
from distdoctor.knowledge.i18n import t

from ..runner import CommandResult, Runner, SubprocessRunner
from .fanout import FanoutOptions, HostResult, OnHost, collect_command, parse_output

_SRUN_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")
_SRUN_ERROR = re.compile(r"srun: error: (\S+): tasks? ([\d,\-]+): (.*)$")


class SlurmError(InputError, ValueError):
    """srun cannot be used here (no allocation); the message is one line."""


# ---- pdsh -------------------------------------------------------------------------------------

def pdsh_argv(opts: FanoutOptions) -> list[str]:
    """`pdsh -w HOSTS -f N -t CONNECT -u TIMEOUT distdoctor collect`: pdsh itself bounds the
    concurrency (-f) and kills a host's command after -u seconds."""
    return ["pdsh", "-w", ",".join(opts.hosts), "-f", str(opts.concurrency),
            "-t", str(opts.connect_timeout), "-u", str(max(1, math.ceil(opts.timeout))),
            shlex.join(collect_command(opts))]


def split_pdsh(text: str) -> dict[str, list[str]]:
    """pdsh's `host: line` output split per host; `pdsh@me: host: message` lines go to host."""
    out: dict[str, list[str]] = defaultdict(list)
    for line in text.splitlines():
        label, sep, rest = line.partition(": ")
        if not sep and line.endswith(":"):  # "host:" for an empty remote line
            label, rest = line[:-1], ""
        elif not sep:
            continue
        if label.startswith("pdsh@"):
            label, sep, rest = rest.partition(": ")
            if not sep:
                continue
        if label and not any(c.isspace() for c in label):
            out[label].append(rest)
    return out


def fan_out_pdsh(opts: FanoutOptions, runner: Runner | None = None,
                 on_host: OnHost | None = None) -> list[HostResult]:
    """Run pdsh once and sort its output into one result per host."""
    runner = runner or SubprocessRunner()
    hosts = list(opts.hosts)
    waves = math.ceil(len(hosts) / max(1, opts.concurrency))
    # pdsh enforces -u per host; this outer limit only guards against pdsh itself hanging
    outer = waves * (opts.timeout + opts.connect_timeout) + 10
    start = time.monotonic()
    res = runner(pdsh_argv(opts), timeout=outer)
    took = time.monotonic() - start
    out, err = split_pdsh(res.stdout), split_pdsh(res.stderr)
    results = []
    everyone = hosts + sorted(set(out) - set(hosts))  # pdsh may expand names itself
    for i, host in enumerate(everyone):
        results.append(_pdsh_host(host, out.get(host, []), err.get(host, []), res, opts, took))
        if on_host:
            on_host(results[-1], i + 1, len(everyone))
    return results


def _pdsh_host(host: str, out: list[str], err: list[str], res: CommandResult,
               opts: FanoutOptions, took: float) -> HostResult:
    doc, reason = parse_output("\n".join(out))
    if doc is not None:
        return HostResult(host, True, "", took, doc)
    messages = [m.strip() for m in err if m.strip()]
    if any("command timeout" in m for m in messages):
        return HostResult(host, False, t("timed out after {seconds}s (pdsh -u)", seconds=f"{opts.timeout:g}"), took)
    if messages:
        return HostResult(host, False, "; ".join(messages[-2:]), took)
    if res.error:
        return HostResult(host, False, t("no snapshot before pdsh stopped: {error}", error=res.error), took)
    return HostResult(host, False, reason, took)


# ---- srun -------------------------------------------------------------------------------------

def srun_argv(env: Mapping[str, str], opts: FanoutOptions) -> list[str]:
    """One step with one task per node of the current allocation (or of --hosts within it)."""
    if not env.get("SLURM_JOB_ID"):
        raise SlurmError(t("--via srun needs a Slurm allocation (SLURM_JOB_ID is not set); run it "
                         "inside one, e.g. `salloc -N 4 distdoctor fleet collect --via srun "
                         "-o fleet/`, or use --via ssh/pdsh"))
    if opts.hosts:
        nodes = str(len(opts.hosts))
    else:
        nodes = env.get("SLURM_NNODES") or env.get("SLURM_JOB_NUM_NODES") or ""
        if not nodes.isdigit():
            raise SlurmError(t("SLURM_NNODES is not set: pass the nodes with --hosts"))
    argv = ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1",
            # --overlap: the hung job's own step may hold every CPU of the allocation
            "--overlap", "--label", "--kill-on-bad-exit=0", "--job-name=distdoctor-collect"]
    if env.get("SLURM_GPUS_ON_NODE", "").isdigit():
        # without it a step may be fenced off from the GPUs and report none
        argv.append(f"--gpus-per-node={env['SLURM_GPUS_ON_NODE']}")
    if opts.hosts:
        argv.append(f"--nodelist={','.join(opts.hosts)}")
    return argv + collect_command(opts)


def split_srun(text: str) -> dict[int, list[str]]:
    """srun --label output (` 3: line`) split per task id."""
    out: dict[int, list[str]] = defaultdict(list)
    for line in text.splitlines():
        match = _SRUN_LABEL.match(line)
        if match:
            out[int(match.group(1))].append(match.group(2))
    return out


def srun_errors(text: str) -> dict[int, tuple[str, str]]:
    """`srun: error: node3: task 3: Exited with exit code 2` -> {3: ("node3", "Exited ...")}."""
    found: dict[int, tuple[str, str]] = {}
    for line in text.splitlines():
        match = _SRUN_ERROR.search(line)
        if not match:
            continue
        node, tasks, message = match.groups()
        for part in tasks.split(","):
            lo, _, hi = part.partition("-")
            if lo.isdigit():
                for task in range(int(lo), int(hi or lo) + 1):
                    found[task] = (node, message.strip())
    return found


def fan_out_srun(env: Mapping[str, str], opts: FanoutOptions, runner: Runner | None = None,
                 on_host: OnHost | None = None) -> list[HostResult]:
    """Run the srun step and make one result per task (named by the node it ran on)."""
    runner = runner or SubprocessRunner()
    argv = srun_argv(env, opts)
    ntasks = int(argv[1].split("=", 1)[1])
    nodes = list(opts.hosts) or _nodelist(env, runner)
    start = time.monotonic()
    # room for the step to be scheduled on top of the collect itself
    res = runner(argv, timeout=opts.timeout + 30)
    took = time.monotonic() - start
    out, errs = split_srun(res.stdout), split_srun(res.stderr)
    failed = srun_errors(res.stderr)
    results = []
    for task in range(ntasks):
        doc, reason = parse_output("\n".join(out.get(task, [])))
        if doc is not None:
            results.append(HostResult(doc["host"], True, "", took, doc))
        else:
            node = failed.get(task, ("", ""))[0] or (nodes[task] if task < len(nodes) else "")
            said = [ln.strip() for ln in errs.get(task, []) if ln.strip()]
            why = failed.get(task, ("", ""))[1]
            if said:
                reason = said[-1] + (f" ({why})" if why else "")
            elif why:
                reason = why
            elif res.error:
                reason = t("no snapshot before srun stopped: {error}", error=res.error)
            results.append(HostResult(node or f"task {task}", False, reason, took))
        if on_host:
            on_host(results[-1], task + 1, ntasks)
    return results


def _nodelist(env: Mapping[str, str], runner: Runner) -> list[str]:
    """The allocation's node names in task order, from `scontrol show hostnames` (best effort:
    only used to name nodes whose task printed nothing)."""
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        return []
    res = runner(["scontrol", "show", "hostnames", nodelist], timeout=5)
    return res.stdout.split() if res.ok else []
