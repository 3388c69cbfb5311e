"""Versions probe: Python, OS, glibc, torch/CUDA/NCCL of the target interpreter, and the driver."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from types import MappingProxyType
from typing import Any

from . import cuda_driver
from .base import OK, ProbeContext, ProbeResult, unavailable
from .procenv import EnvUnreadable, target_env

NAME = "versions"
MARKER = "DISTDOCTOR_JSON:"
# Printed first thing: without it the "interpreter" never ran Python (a shell script, another
# binary, a wrapper that hangs), which is bad usage rather than a fact about torch.
STARTED = "DISTDOCTOR_STARTED"
# Where system NCCL builds live (the CUDA repos, conda-less installs, NGC images).
SYSTEM_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
                   "/usr/lib", "/usr/local/lib", "/usr/local/cuda/lib64", "/usr/local/nccl/lib")

# Runs in the target interpreter. It never initialises CUDA and imports torch only for a CUDA or
# ROCm build: a CPU build has no NCCL to ask about, and version.py is read as a plain file.
SNIPPET = r'''
import sys
sys.stdout.write("''' + STARTED + r'''\n")
sys.stdout.flush()
import glob, json, os, platform
out = {"python": {"executable": sys.executable, "version": platform.python_version(),
                  "implementation": platform.python_implementation()}}
try:
    out["glibc"] = os.confstr("CS_GNU_LIBC_VERSION")
except (ValueError, OSError, AttributeError):
    out["glibc"] = None
pk = []
try:
    from importlib import metadata
    for d in metadata.distributions():
        n = d.metadata["Name"] or ""
        if n.lower().replace("_", "-").startswith("nvidia-nccl"):
            pk.append({"name": n, "version": d.version})
except Exception as e:
    out["packages_error"] = "%s: %s" % (type(e).__name__, e)
out["nccl_packages"] = pk
libs = []
for entry in sys.path:
    for pat, src in (("nvidia/nccl/lib/libnccl.so*", "pip"), ("torch/lib/libnccl*.so*", "torch")):
        for f in glob.glob(os.path.join(entry or ".", pat)):
            libs.append({"path": os.path.realpath(f), "source": src})
for entry in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
    if entry:
        for f in glob.glob(os.path.join(entry, "libnccl.so*")):
            libs.append({"path": os.path.realpath(f), "source": "LD_LIBRARY_PATH"})
out["nccl_libs"] = libs
t = {"present": False}
try:
    import importlib.util
    spec = importlib.util.find_spec("torch")
except (ImportError, ValueError) as e:
    spec = None
    t["error"] = "%s: %s" % (type(e).__name__, e)
if spec is not None and spec.origin:
    t["present"] = True
    t["path"] = os.path.dirname(spec.origin)
    ns = {}
    try:
        with open(os.path.join(t["path"], "version.py")) as fh:
            exec(compile(fh.read(), "torch/version.py", "exec"), ns)
        t.update(version=ns.get("__version__"), cuda=ns.get("cuda"), hip=ns.get("hip"),
                 git=ns.get("git_version"))
    except Exception as e:
        t["version_file_error"] = "%s: %s" % (type(e).__name__, e)
    t["imported"] = False
    if t.get("cuda") or t.get("hip") or "version" not in t:
        try:
            import torch
            t.update(imported=True, version=torch.__version__, cuda=torch.version.cuda,
                     hip=getattr(torch.version, "hip", None))
            try:
                v = torch.cuda.nccl.version()
                if isinstance(v, int):
                    v = (v // 10000, v % 10000 // 100, v % 100) if v >= 10000 else (v // 1000, v % 1000 // 100, v % 100)
                t["nccl"] = ".".join(str(x) for x in v)
            except Exception as e:
                t["nccl_error"] = "%s: %s" % (type(e).__name__, e)
            t["cuda_initialized"] = bool(torch.cuda.is_initialized())
            try:
                with open("/proc/self/maps") as fh:
                    t["nccl_loaded_paths"] = sorted({l.split()[-1] for l in fh if "libnccl" in l})
            except OSError as e:
                t["nccl_loaded_paths_error"] = str(e)
        except Exception as e:
            t["import_error"] = "%s: %s" % (type(e).__name__, e)
out["torch"] = t
sys.stdout.write("\n''' + MARKER + r'''" + json.dumps(out) + "\n")
'''

_LIB_VERSION_RE = re.compile(r"libnccl\.so\.(\d+\.\d+\.\d+)$")


def ask_target(ctx: ProbeContext, env: dict[str, str] | None) -> tuple[dict[str, Any] | None, str, bool]:
    """Run SNIPPET in the target interpreter: (answer, "", True), or (None, why it failed, whether
    the interpreter ran Python code at all)."""
    result = ctx.runner([ctx.python, "-c", SNIPPET], timeout=ctx.timeout, env=env)
    started = STARTED in result.stdout
    if result.error:
        prefix = f"{ctx.python}: "  # the runner names the command; the reason names it already
        return None, result.error.removeprefix(prefix), started
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                answer = json.loads(line[len(MARKER):])
            except json.JSONDecodeError as exc:
                return None, f"unreadable answer: {exc}", started
            if isinstance(answer, dict):
                return answer, "", True
    tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
    return None, f"exited {result.returncode}: {tail[:200]}", started


def system_nccl_libs(ctx: ProbeContext) -> list[dict[str, str]]:
    """libnccl.so* files in the usual system library folders, real paths, deduplicated."""
    found = []
    for folder in SYSTEM_LIB_DIRS:
        directory = ctx.path(folder)
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            if name.startswith("libnccl.so"):
                real = os.path.realpath(directory / name)
                shown = "/" + os.path.relpath(real, ctx.root) if ctx.root != Path("/") else real
                found.append({"path": shown, "source": "system"})
    return found


def nccl_facts(answer: dict[str, Any], system: list[dict[str, str]]) -> dict[str, Any]:
    """Every NCCL build found, its version where known, and how many distinct builds there are."""
    torch = answer.get("torch") or {}
    packages = list(answer.get("nccl_packages") or [])
    libs: dict[str, dict[str, Any]] = {}
    for lib in list(answer.get("nccl_libs") or []) + system:
        entry = libs.setdefault(lib["path"], dict(lib))
        match = _LIB_VERSION_RE.search(os.path.basename(lib["path"]))
        entry["version"] = match.group(1) if match else None
    pip_version = packages[0]["version"] if len(packages) == 1 else None
    for entry in libs.values():
        if entry["version"] is None and entry["source"] == "pip":
            entry["version"] = pip_version  # pip's file is libnccl.so.2: its package knows the rest
    versions = {p["version"].split("+")[0] for p in packages}
    versions |= {e["version"] for e in libs.values() if e["version"]}
    described = [f"{p['name']} {p['version']} (pip)" for p in packages]
    described += [f"{e['path']} {e['version'] or '?'} ({e['source']})" for e in libs.values()
                  if e["source"] != "pip"]
    loaded_paths = torch.get("nccl_loaded_paths", [])
    return {
        "loaded": torch.get("nccl"),
        "loaded_paths": loaded_paths,
        "packages": packages,
        "libraries": list(libs.values()),
        "versions": sorted(versions, key=cuda_driver.vtuple),
        "builds": described,
        # the most builds one view tells apart: versions on disk, pip packages, libraries mapped
        # in the process (checks.toml warns above one)
        "distinct_builds": max(len(versions), len(packages), len(loaded_paths)),
    }


def probe_versions(ctx: ProbeContext, *, nvml: Any = None) -> ProbeResult:
    """Ask the target interpreter about torch/NCCL in a subprocess; read the driver here."""
    if not (os.path.isfile(ctx.python) and os.access(ctx.python, os.X_OK)):
        return unavailable(NAME, f"interpreter not found: {ctx.python}")
    try:
        env = dict(target_env(ctx))
    except EnvUnreadable as exc:
        return unavailable(NAME, str(exc))
    answer, why, started = ask_target(ctx, env)
    if answer is None:
        return unavailable(NAME, f"could not ask {ctx.python}: {why}", interpreter_started=started,
                           interpreter_error=why)
    facts: dict[str, Any] = {
        "python": answer.get("python", {}),
        "glibc": answer.get("glibc"),
        "os": _os_name(ctx),
        "kernel": (ctx.read_text("/proc/sys/kernel/osrelease") or "").strip() or None,
        "torch": answer.get("torch", {}),
    }
    torch = facts["torch"]
    facts["torch_present"] = bool(torch.get("present"))
    if torch.get("imported") or torch.get("import_error"):
        # only judged when torch was really imported (CUDA/ROCm builds), never guessed
        facts["torch_broken"] = bool(torch.get("import_error"))
    nccl = nccl_facts(answer, system_nccl_libs(ctx))
    facts["nccl"] = nccl
    facts["two_nccls"] = nccl["distinct_builds"] > 1  # for the readers of the facts; the check compares the count
    facts["nccl_builds_text"] = "; ".join(nccl["builds"])
    if nvml is None and ctx.root != Path("/"):
        # NVML answers for the real host, which a recorded root is not
        driver, nvml_why = None, "recorded root: NVML not consulted"
    else:
        driver, nvml_why = cuda_driver.driver_from_nvml(nvml)
    if driver is None:
        driver = cuda_driver.driver_from_proc(ctx)
    facts["driver"] = driver or {"source": "none", "reason": nvml_why or "no NVIDIA driver"}
    facts.update(cuda_driver.judge(driver, torch.get("cuda")))
    if torch.get("cuda") and not driver:
        facts["cuda_build_without_driver"] = True
    return ProbeResult(NAME, OK, MappingProxyType(facts))


def _os_name(ctx: ProbeContext) -> str | None:
    text = ctx.read_text("/etc/os-release") or ""
    match = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.M)
    return match.group(1) if match else None
