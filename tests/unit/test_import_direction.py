"""The layers import one way only: knowledge <- probes <- tui (a static scan of every import).

tests/integration/test_import_hygiene.py proves at run time that `check` loads neither textual nor torch;
this test reads the source of every module, imports inside functions included, so a lazy import
that breaks the layering is caught even on a path no test runs.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAYERS = ("knowledge", "probes", "tui")  # each may import only those before it
# Third-party packages only the named layer may import (textual: the UI; torch: never, it is
# asked about in a subprocess of the job's interpreter).
ONLY_IN = {"textual": {"tui"}, "rich": {"tui"}, "torch": set()}
# Code that runs inside the user's training job, not in distdoctor's process: the job has torch.
IN_THE_JOB = ("probes/guard/",)


def modules() -> list[tuple[str, Path]]:
    return [(layer, path) for layer in LAYERS for path in sorted((REPO / layer).rglob("*.py"))]


def imported(layer: str, path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in a file, relative ones resolved."""
    rel = path.relative_to(REPO / layer).with_suffix("")
    parts = ["distdoctor", layer, *rel.parts]
    package = parts[:-1] if rel.name != "__init__" else parts[:-1]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
                # `from . import x` names modules too: x may be a sub-module
                out += [(node.lineno, f"{name}.{alias.name}") for alias in node.names]
            else:
                out.append((node.lineno, node.module or ""))
    return out


def violations() -> list[str]:
    found = []
    for layer, path in modules():
        allowed = set(LAYERS[:LAYERS.index(layer) + 1])
        for line, name in imported(layer, path):
            top = name.split(".")
            where = f"{path.relative_to(REPO)}:{line}"
            if top[0] == "distdoctor" and len(top) > 1 and top[1] in LAYERS and top[1] not in allowed:
                found.append(f"{where}: {layer} imports {name} (only {', '.join(sorted(allowed))})")
            in_job = str(path.relative_to(REPO)).startswith(IN_THE_JOB) and top[0] == "torch"
            if top[0] in ONLY_IN and layer not in ONLY_IN[top[0]] and not in_job:
                found.append(f"{where}: {layer} imports {top[0]}")
    return found


def test_every_layer_imports_only_the_layers_below_it() -> None:
    assert violations() == []


def test_the_scan_sees_every_kind_of_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the checker itself must catch what it claims to: absolute, relative, lazy, `from . import`
    fake = tmp_path / "knowledge" / "sub"
    fake.mkdir(parents=True)
    (tmp_path / "probes").mkdir()
    (tmp_path / "tui").mkdir()
    (fake / "bad.py").write_text(
        "import distdoctor.tui.cli\n"
        "from ...probes import runner\n"
        "def lazy():\n    from ...tui.commands import common\n    import textual.app\n"
        "from .. import model\n"  # distdoctor.knowledge.model: allowed
        "from . import torch\n")  # distdoctor.knowledge.sub.torch: a module of ours, allowed
    monkeypatch.setattr(__import__(__name__), "REPO", tmp_path)
    got = violations()
    assert [v.split(": ", 1)[1] for v in got] == [
        "knowledge imports distdoctor.tui.cli (only knowledge)",
        "knowledge imports distdoctor.probes.runner (only knowledge)",
        "knowledge imports distdoctor.tui.commands.common (only knowledge)",
        "knowledge imports textual",
    ]


def test_the_scan_covers_the_package() -> None:
    files = modules()
    assert {layer for layer, _ in files} == set(LAYERS)
    assert len(files) > 100  # every module, not a sample
