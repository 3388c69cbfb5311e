"""The drill in the app: run the faulty job, classify what on call sees, open evidence, answer,
then the reveal (the injected fault, the lines that prove it) and the score.

`distdoctor --drill NAME` starts `DrillApp`; a test (or a mentor replaying an attempt) can hand
it an already-run drill folder instead (`from_dir`), so nothing runs.
"""
from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, OptionList, Static
from textual.widgets.option_list import Option

from distdoctor.probes.drill import get, run_drill
from distdoctor.probes.drill.score import Attempt, score

from ..lang import localise_bindings, resolve, t, wrap_between_wide_characters

TAIL = 14  # lines of console an engineer on call sees first
VIEW_LINES = 400


def log_files(folder: Path) -> list[tuple[str, Path]]:
    """(a readable name, path) of every file the job wrote, console first."""
    logs = folder / "logs"
    out = []
    for path in sorted(logs.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(logs)
        parts = rel.parts
        if len(parts) >= 3 and parts[0] == "torchrun" and parts[-2].isdigit():
            name = t("rank {rank} {name}", rank=parts[-2], name=path.stem)  # torchrun/<run>/attempt_0/<rank>/stdout.log
        else:
            name = str(rel)
        out.append((name, path))
    out.sort(key=lambda item: (item[0] != "console.log", item[0]))
    return out


def tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return t("(cannot read {name}: {error})", name=path.name, error=exc.strerror or exc)
    return "\n".join(text.splitlines()[-lines:])


def proof_lines(folder: Path, pattern: str, limit: int = 6) -> list[str]:
    found = []
    rx = re.compile(pattern)
    for name, path in log_files(folder):
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if rx.search(line):
                found.append(f"{name}:{n}: {line.strip()[:110]}")
                if len(found) >= limit:
                    return found
    return found


class DrillScreen(Screen[None]):
    """One drill, start to score. Stages: run, classify, investigate, cause, rank, reveal."""

    BINDINGS = [Binding("q", "app.quit", "Quit"), Binding("escape", "back", "Back", show=False)]

    def __init__(self, name: str, kb: Any, store: Any = None, *, from_dir: Path | None = None,
                 python: str = "") -> None:
        super().__init__(id="drill")
        if resolve() != "en":
            localise_bindings(self)
        drill = get(name)
        assert drill is not None, name
        self.drill = drill
        self.kb = kb
        self.store = store
        self.folder = Path(from_dir) if from_dir else None
        self.python = python
        self.cancel = threading.Event()
        self.stage = "run"
        self.attempt = Attempt(name)
        self.result: dict[str, Any] | None = None
        self.files: list[tuple[str, Path]] = []
        self.session_id = ""

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="drill-body"):
            yield Static(id="drill-prompt")
            yield OptionList(id="drill-choices")
            with VerticalScroll(id="drill-view"):
                yield Static(id="drill-text")
        yield Footer()

    def on_mount(self) -> None:
        self.title = t("drill: {name}", name=self.drill.name)
        if self.folder is not None:
            self._classify()
            return
        self._prompt(t("Drill {name}: a small training job is starting with one real fault in it. "
                       "Watch its console; when it stops, you are on call.", name=self.drill.name))
        self._lines: list[str] = []
        self.query_one("#drill-choices", OptionList).display = False
        self._show(t("starting {name} (torch takes a few seconds to load)...", name=self.drill.name))
        self.run_worker(self._run, thread=True, name="drill-run", exit_on_error=False)

    def _run(self) -> None:
        def on_line(line: str) -> None:
            self.app.call_from_thread(self._console_line, line)

        try:
            result = run_drill(self.drill.name, python=self.python, on_line=on_line,
                               cancel=self.cancel)
        except ValueError as exc:  # DrillError: no torch there, unwritable state dir
            self.app.call_from_thread(self._prompt, t("The drill could not run: {error}", error=exc))
            return
        self.app.call_from_thread(self._ran, result)

    def _console_line(self, line: str) -> None:
        self._lines = (self._lines + [line])[-VIEW_LINES:]
        self._show("\n".join(self._lines[-40:]))

    def _ran(self, result: Any) -> None:
        self.folder = Path(result.dir)
        if result.outcome == "stopped":
            self._prompt(t("Stopped: the job's processes were killed."))
            return
        self._classify()

    def on_unmount(self) -> None:
        self.cancel.set()  # leaving mid-run kills the job's tree (the runner checks it gone)

    # stages -------------------------------------------------------------------------------
    def _prompt(self, text: str) -> None:
        self.query_one("#drill-prompt", Static).update(text)

    def _show(self, text: str | Text, end: bool = True) -> None:
        """Show text below the menu; a log is scrolled to its end, where failures are."""
        self.query_one("#drill-text", Static).update(text if isinstance(text, Text) else Text(text))
        view = self.query_one("#drill-view", VerticalScroll)
        # after the refresh: the new text's height is known only once it is laid out
        self.call_after_refresh(view.scroll_end if end else view.scroll_home, animate=False)

    def _choices(self, options: list[tuple[str, str]]) -> None:
        menu = self.query_one("#drill-choices", OptionList)
        menu.display = bool(options)  # no empty box while the job runs
        menu.clear_options()
        menu.add_options([Option(label, id=key) for key, label in options])
        menu.highlighted = 0 if options else None
        menu.focus()

    def _classify(self) -> None:
        assert self.folder is not None
        self.stage = "classify"
        self.files = log_files(self.folder)
        console = next((p for n, p in self.files if n == "console.log"), None)
        self._prompt(t("You are paged. Below is the end of the job's console, what on call sees "
                       "first. What kind of failure is it?"))
        self._show(tail(console, TAIL) if console else t("(no console output)"))
        self._choices([("hang", t("Hang: it stopped making progress (then timed out)")),
                       ("error", t("Error: it stopped with a traceback or an exit code"))])

    def _investigate(self, opened: str = "") -> None:
        self.stage = "investigate"
        self._prompt(t("Open the evidence you need (each opening is a step; the shortest path "
                       "opens one), then answer.") + (t("  Showing: {what}", what=opened) if opened else ""))
        options = [(f"file:{i}", t("open {name}", name=name)) for i, (name, _) in enumerate(self.files)]
        options.append(("analyse", t("run the log analyser on every file (distdoctor logs)")))
        options.append(("answer", t("answer: name the cause and the rank")))
        self._choices(options)

    def _open(self, key: str) -> None:
        if key == "analyse":
            self.attempt.step("open:analyser")
            self._show(self._analysis())
            self._investigate(t("the log analyser"))
            return
        name, path = self.files[int(key.split(":", 1)[1])]
        self.attempt.step(f"open:{name}")
        self._show(tail(path, VIEW_LINES))
        self._investigate(name)

    def _analysis(self) -> str:
        from distdoctor.knowledge.logs import analyse

        assert self.folder is not None
        report = analyse([str(self.folder / "logs")], self.kb, symptom=self.attempt.symptom)
        data = report.to_dict()
        lines = [f"distdoctor logs {self.folder / 'logs'}"]
        verdict = data.get("verdict") or {}
        if verdict.get("summary"):
            lines.append(t("verdict: {summary}", summary=verdict["summary"]))
        for cause in data.get("causes", [])[:3]:
            lines.append("  " + t("{id}  score {score}", id=cause.get("id"), score=cause.get("score", "")))
        return "\n".join(lines)

    def _ask_cause(self) -> None:
        self.stage = "cause"
        self.attempt.step("answer")
        self._prompt(t("Which root cause? (stable cause ids, as in the guide)"))
        self._choices([(cid, f"{cid}: {c.title}") for cid, c in self.kb.causes.items()])

    def _ask_rank(self) -> None:
        self.stage = "rank"
        nproc = self._nproc()
        self._prompt(t("Which rank is to blame?"))
        self._choices([(str(r), t("rank {rank}", rank=r)) for r in range(nproc)] + [("none", t("no single rank"))])

    def _nproc(self) -> int:
        try:
            label = json.loads((self.folder / "label.json").read_text(encoding="utf-8"))  # type: ignore[operator]
            return int(label.get("nproc") or self.drill.nproc)
        except (OSError, ValueError, TypeError):
            return self.drill.nproc

    def _reveal(self) -> None:
        assert self.folder is not None
        self.stage = "reveal"
        self.result = score(self.drill, self.attempt)
        r = self.result
        text = Text()
        text.append(t("PASSED") if r["passed"] else t("NOT PASSED"), style="bold green" if r["passed"] else "bold red")
        text.append(t("  score {points}/100", points=r["points"]) + "\n")
        right = lambda ok: t("right") if ok else t("wrong")  # noqa: E731
        text.append(t("cause: you said {picked}, it was {expected} ({verdict})", picked=r["cause"]["picked"],
                      expected=r["cause"]["expected"], verdict=right(r["cause"]["right"])) + "\n")
        rank = lambda v: t("no single rank") if v is None else t("rank {rank}", rank=v)  # noqa: E731
        text.append(t("rank: you said {picked}, it was {expected} ({verdict})", picked=rank(r["rank"]["picked"]),
                      expected=rank(r["rank"]["expected"]), verdict=right(r["rank"]["right"])) + "\n")
        text.append(t("steps: {taken} taken, {shortest} on the shortest path", taken=r["steps"]["taken"],
                      shortest=r["steps"]["shortest"]) + "\n")
        text.append(t("switches left on: {names}", names=", ".join(r["switches_left_on"]) or t("none")) + "\n\n")
        text.append(t("What was injected: "), style="bold")
        text.append(t(self.drill.how) + "\n\n" + t("The lines that prove it:") + "\n")
        for line in proof_lines(self.folder, self.drill.proof) or [t("(none found)")]:
            text.append(f"  {line}\n")
        self._show(text, end=False)
        saved = self._save(r)
        self._prompt(t("The reveal. {saved}", saved=saved))
        self._choices([("again", t("try again on the same run")), ("quit", t("quit"))])

    def _save(self, result: dict[str, Any]) -> str:
        from distdoctor.probes.drill import store as passed_store

        where = []
        if self.store is not None:
            try:
                if not self.session_id:
                    self.session_id = self.store.create(drill=self.drill.name)["id"]
                self.store.append(self.session_id, "drill-score", {**result, "dir": str(self.folder)})
                where.append(t("session {id}", id=self.session_id))
            except Exception as exc:  # noqa: BLE001 - a failed save must not lose the reveal
                where.append(t("not saved to a session ({error})", error=exc))
        try:
            passed_store.save_attempt(self.drill.name, result["points"], result["passed"],
                                      self.session_id)
        except OSError as exc:
            where.append(t("not saved to drills.json ({error})", error=exc.strerror or exc))
        return t("Saved: {where}", where=t("; ").join(where)) if where else ""

    # input ----------------------------------------------------------------------------------
    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        key = event.option.id or ""
        if self.stage == "classify":
            self.attempt.symptom = key
            self.attempt.step(f"classify:{key}")
            self._show("")
            self._investigate()
        elif self.stage == "investigate":
            self._ask_cause() if key == "answer" else self._open(key)
        elif self.stage == "cause":
            self.attempt.cause = key
            self._ask_rank()
        elif self.stage == "rank":
            self.attempt.rank = None if key == "none" else key
            self._reveal()
        elif self.stage == "reveal":
            if key == "quit":
                self.app.exit(0)
            else:
                self.attempt = Attempt(self.drill.name)
                self._classify()

    def action_back(self) -> None:
        if self.stage in ("cause", "rank"):
            self._investigate()


class DrillApp(App[int]):
    """The app for `distdoctor --drill NAME`: one drill screen."""

    CSS_PATH = "drill.tcss"
    TITLE = "distdoctor"

    def __init__(self, name: str, kb: Any, store: Any = None, *, from_dir: Path | None = None,
                 python: str = "") -> None:
        super().__init__()
        if resolve() != "en":
            localise_bindings(self)
            wrap_between_wide_characters()
        self.drill_screen = DrillScreen(name, kb, store, from_dir=from_dir, python=python)

    def on_mount(self) -> None:
        self.push_screen(self.drill_screen)
