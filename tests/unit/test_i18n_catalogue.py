"""The Chinese message catalogue is complete (issue 15): every English text given to the
catalogue function `t` anywhere under tui/, knowledge/ and probes/ has a Chinese translation
with the same placeholders, and in the command line's modules no English text reaches the
user without passing through `t`.

How the code is read (ast, nothing is imported or run):
- a call `t(...)`, `i18n.t(...)` or `_(...)` (check_text.py's own wrapper of i18n.t) whose first
  argument is a string literal, an implicit concatenation of literals, or the name of a
  module-level constant holding one: that text is a catalogue key;
- the heuristic for "no English without t" (test_cli_output_goes_through_the_catalogue), in
  the modules localised for the command line (LOCALISED): a string literal or f-string that
  holds a word of three letters or more and is given straight to print(), to a
  UsageError(...), to argparse.ArgumentTypeError(...), to one of the probes' input errors
  (TopologyInputError, DumpError, ...), to a list's append() (lint's errors, the notes), or as
  help=/description=/epilog= of an argparse call, is a failure. Text built elsewhere and passed in by name is not followed,
  and literals that are code (a command line, an env line, a path) are allowed when they
  start with one of CODE_PREFIXES.
"""
from __future__ import annotations

import ast
import re
import string
from collections.abc import Iterator
from pathlib import Path

import pytest

from distdoctor.knowledge import i18n

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tui", "knowledge", "probes")
CALLS = {"t", "_", "tr"}  # tr: knowledge.logs imports i18n.t as tr
# the modules of the command line whose output was localised (issue 15); logs.py and
# logs_text.py belong to the log analyser's own work
LOCALISED = ("tui/cli.py", "tui/errors.py", "tui/commands/common.py", "tui/commands/topo.py",
             "tui/commands/lint.py", "tui/commands/knobs.py", "tui/commands/fleet.py",
             "tui/commands/fleet_text.py", "tui/commands/fr.py", "tui/commands/ras.py",
             "tui/commands/stacks.py", "tui/commands/collect.py", "tui/commands/repro.py",
             "tui/commands/repro_view.py", "tui/commands/drill.py", "tui/commands/sessions.py",
             "tui/commands/report.py", "tui/commands/check.py", "tui/commands/knowledge.py",
             "tui/commands/run.py", "tui/commands/watch.py", "tui/commands/watch_view.py",
             # the probes whose input errors reach the user as the one-line error
             "probes/topology/load.py", "probes/flightrec/reader.py", "probes/repro/options.py",
             "probes/repro/bisect.py", "probes/repro/run.py", "probes/drill/run.py", "probes/fleet/hosts.py",
             "probes/fleet/batch.py", "probes/fleet/fanout.py", "probes/stacks/dump.py", "probes/ras.py",
             "probes/lint/__init__.py")
CODE_PREFIXES = ("distdoctor ", "export ", "  distdoctor ", "python ", "ssh ", "  ssh ", "kill ")
SINKS = {"print", "UsageError", "ArgumentTypeError", "append",
         # the input errors the commands turn into UsageError as they are
         "TopologyInputError", "DumpError", "ReproInputError", "DrillError", "HostListError", "SlurmError",
         "KubectlError", "NoPySpy"}
HELP_KEYWORDS = {"help", "description", "epilog"}
_WORD = re.compile(r"[A-Za-z]{3,}")
_PROSE = re.compile(r"[A-Za-z]{3,} [A-Za-z]{2,}")  # two words: a list's append() takes code too
_FORMAT = string.Formatter()


def _modules() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def _text(node: ast.AST, constants: dict[str, str]) -> str | None:
    """The string a node stands for: a literal, or a module constant's name."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def _constants(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def catalogue_keys() -> dict[str, str]:
    """Every catalogue key in the code -> where it is used (file:line)."""
    keys: dict[str, str] = {}
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = _constants(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _callee(node) in CALLS and node.args:
                if _callee(node) == "t" and isinstance(node.func, ast.Attribute) \
                        and getattr(node.func.value, "id", "") != "i18n":
                    continue  # some other object's .t()
                text = _text(node.args[0], constants)
                if text is not None:
                    keys.setdefault(text, f"{path.relative_to(ROOT)}:{node.lineno}")
    return keys


def _fields(text: str) -> set[str]:
    """The {placeholders} str.format fills, and argparse's %(name)s ones."""
    try:
        names = {name for _, name, _, _ in _FORMAT.parse(text) if name is not None}
    except ValueError as exc:
        return {f"<bad template: {exc}>"}
    return names | set(re.findall(r"%\(\w+\)[sdr]|%[sdr]", text))


def test_the_code_uses_the_catalogue() -> None:
    keys = catalogue_keys()
    assert len(keys) > 300  # the walk found the calls (a renamed function would find none)
    assert "distdoctor: error: {error}" in keys


def test_every_message_has_a_chinese_translation() -> None:
    zh = i18n.messages("zh")
    missing = [f"{where}: {key!r}" for key, where in sorted(catalogue_keys().items(), key=lambda kv: kv[1])
               if key not in zh and _WORD.search(key)]
    assert not missing, f"{len(missing)} message(s) without a Chinese translation:\n" + "\n".join(missing)


def test_translations_keep_the_placeholders() -> None:
    zh = i18n.messages("zh")
    wrong = [f"{where}: {key!r}: English {sorted(_fields(key))}, Chinese {sorted(_fields(zh[key]))}"
             for key, where in catalogue_keys().items() if key in zh and _fields(key) != _fields(zh[key])]
    assert not wrong, "\n".join(wrong)


def test_catalogue_files_parse_and_hold_only_messages() -> None:
    tomllib = i18n._tomllib()
    for path in sorted((i18n.DATA_DIR / "zh" / "messages").glob("*.toml")):
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
        assert set(doc) == {"messages"}, path.name
        assert all(isinstance(v, str) and v for v in doc["messages"].values()), path.name


def _english(node: ast.AST, words: re.Pattern[str] = _WORD, code: tuple[str, ...] = CODE_PREFIXES) -> str:
    """The literal text of a string or f-string node if it reads as English prose, else ''."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    elif isinstance(node, ast.JoinedStr):
        text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
    else:
        return ""
    if text.startswith(code) or not words.search(text):
        return ""
    return text


def untranslated_sinks(path: Path, root: Path = ROOT) -> list[str]:
    """'file:line: text' for each English literal handed to the user without t()."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        values = list(node.args) if _callee(node) in SINKS else []
        values += [k.value for k in node.keywords if k.arg in HELP_KEYWORDS]
        appended = _callee(node) == "append"  # an argv list gets options ("--nodelist=") too
        words, code = (_PROSE, CODE_PREFIXES + ("--",)) if appended else (_WORD, CODE_PREFIXES)
        for value in values:
            text = _english(value, words, code)
            if text:
                found.append(f"{path.relative_to(root)}:{value.lineno}: {text[:70]!r}")
    return found


@pytest.mark.parametrize("module", LOCALISED)
def test_cli_output_goes_through_the_catalogue(module: str) -> None:
    problems = untranslated_sinks(ROOT / module)
    assert not problems, "English text printed without t():\n" + "\n".join(problems)


def test_the_heuristic_sees_a_bare_print(tmp_path: Path) -> None:
    """The silent twin's counterpart: the check fires on the patterns it claims to catch."""
    (tmp_path / "m.py").write_text(
        'print("no such thing here")\n'
        'print(t("fine"))\n'
        'raise UsageError(f"--x {x}: not a number")\n'
        'p.add_argument("--y", help="the y value")\n'
        'print("distdoctor logs ./x")\n', encoding="utf-8")
    found = untranslated_sinks(tmp_path / "m.py", tmp_path)
    assert [f.split(":")[1] for f in found] == ["1", "3", "4"]


def test_a_message_in_two_files_has_one_translation() -> None:
    """All files merge into one table: the same English in two of them must not be translated
    two ways, or which one wins would depend on the files' names."""
    tomllib = i18n._tomllib()
    seen: dict[str, dict[str, str]] = {}
    for path in sorted((i18n.DATA_DIR / "zh" / "messages").glob("*.toml")):
        for key, value in tomllib.loads(path.read_text(encoding="utf-8"))["messages"].items():
            seen.setdefault(key, {})[path.name] = value
    twice = {k: v for k, v in seen.items() if len(set(v.values())) > 1}
    assert not twice, twice
