"""The text of `distdoctor check`: one block per finding, then the next actions to copy, at any width."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from distdoctor.knowledge import i18n

STATUS_ORDER = ("fail", "warn", "error", "unavailable", "ok")
STYLES = {"fail": "bold red", "warn": "yellow", "error": "magenta", "unavailable": "dim",
          "ok": "green"}
# The status word always leads its block, so colour never carries the meaning alone; the column
# fits the longest word ("UNAVAILABLE") and a space.
LABEL = max(len(s) for s in STATUS_ORDER) + 1
MIN_WIDTH = 40

Line = tuple[str, str, str]  # (status word or "", style of the rest, the rest of the line)


def _(message: str, **values: Any) -> str:
    """A fixed phrase in the output's language (knowledge/i18n.py; English is the key)."""
    return i18n.t(message, **values)


def word_of(status: str) -> str:
    """The status word that leads a block: FAIL, WARN, ... (in Chinese: 失败, 警告, ...)."""
    return _(status.upper())


def label_width() -> int:
    """LABEL in the output's language: the longest status word, in display cells, and a space."""
    return max(i18n.cells(word_of(s)) for s in STATUS_ORDER) + 1


def ordered(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Worst first; the sort is stable, so probe order is kept within a status."""
    rank = {s: i for i, s in enumerate(STATUS_ORDER)}
    return sorted(findings, key=lambda f: rank.get(f["status"], len(STATUS_ORDER)))


def summary(findings: list[dict[str, Any]]) -> str:
    counts = {s: sum(1 for f in findings if f["status"] == s) for s in STATUS_ORDER}
    return _(", ").join(_("{n} {status}", n=counts[s], status=_(s)) for s in STATUS_ORDER
                        if counts[s]) or _("no findings")


def actions(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Findings with something to do, in the order they are shown."""
    return [f for f in ordered(findings) if f["status"] in ("fail", "warn") and f["fix"]]


def _wrap(text: str, width: int) -> list[str]:
    # break_on_hyphens=False: ids like rank-crash-deadlock and flags like --nproc-per-node stay
    # whole; Chinese breaks between characters, counted in display cells (i18n.wrap)
    return i18n.wrap(text, max(20, width))


def finding_lines(f: dict[str, Any], width: int, action_no: int | None) -> Iterator[Line]:
    """A block: the status word and title, then (for problems) causes, detail and the action."""
    status = f["status"]
    body = width - label_width()
    word = word_of(status)
    for i, part in enumerate(_wrap(f["title"], body)):
        yield (word if i == 0 else "", "", part)
    if status == "ok":
        return
    if f["cause_ids"]:
        for part in _wrap(_("cause: ") + ", ".join(f["cause_ids"]), body):
            yield ("", "", part)
    if f["detail"]:
        for part in _wrap(f["detail"], body):
            yield ("", "dim", part)
    if action_no is not None:
        yield ("", "bold", _("next: action [{n}] below", n=action_no))


def heading(data: dict[str, Any]) -> str:
    return _("distdoctor check on {host} ({seconds} s): {summary}", host=data['host'],
             seconds=f"{data['duration_s']:.2f}", summary=summary(data['findings']))


def report_lines(data: dict[str, Any], width: int) -> Iterator[Line]:
    """The findings' blocks, worst first; the commands to copy are printed after them, unwrapped."""
    findings = ordered(data["findings"])
    numbers = {id(f): n for n, f in enumerate(actions(findings), start=1)}
    previous = None
    for f in findings:
        # a blank line around each problem's block; passing checks stay one compact list
        if not (previous == "ok" and f["status"] == "ok"):
            yield ("", "", "")
        previous = f["status"]
        yield from finding_lines(f, width, numbers.get(id(f)))


def render(data: dict[str, Any]) -> None:
    """Print the report through rich: colour on a terminal, plain text when piped or NO_COLOR."""
    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False)
    width = max(MIN_WIDTH, console.width)
    label = label_width()
    styles = {word_of(s): style for s, style in STYLES.items()}
    for part in _wrap(heading(data), width):
        console.print(Text(part, style="bold"), soft_wrap=True)
    for word, style, rest in report_lines(data, width):
        line = Text()
        if word:
            line.append(i18n.pad(word, label), style=styles.get(word, ""))
        else:
            line.append(" " * label if rest else "")
        line.append(rest, style=style)
        console.print(line, soft_wrap=True)
    todo = actions(data["findings"])
    if not todo:
        return
    console.print(Text("\n" + _("Next actions (copy-paste):"), style="bold"), soft_wrap=True)
    for n, f in enumerate(todo, start=1):
        causes = f" ({', '.join(f['cause_ids'])})" if f["cause_ids"] else ""
        console.print(Text(f"# [{n}] {word_of(f['status'])} {f['check']}{causes}", style="dim"),
                      soft_wrap=True)
        # soft_wrap: a command is never broken by an inserted newline, however narrow the terminal
        for command in f["fix"].splitlines():
            console.print(Text(command), soft_wrap=True)
