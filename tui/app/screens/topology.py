"""The topology picture and the fleet table, opened from the Environment step."""
from __future__ import annotations

import os
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Footer, Input, Static

from ..lang import localise_bindings, resolve, t
from ..messages import FleetCompared
from ..widgets import PathSuggester, Plain, status_text


def topology_text(facts: dict[str, Any], width: int, status: str = "", reason: str = "") -> Text:
    """draw_text of the topology probe's facts, or why there is nothing to draw (`status` and
    `reason` are the probe's, when it ran)."""
    if not facts:
        if status == "running":
            return Text(t("The 'topology' probe is still running; Escape, then t again when the "
                          "Environment step says the probes are done."))
        if status:
            word = status_text(status).plain
            return Text(t("{word}: the 'topology' probe ran and found nothing to draw", word=word)
                        + (t(": {reason}", reason=t(reason)) if reason else t("."))
                        + "\n" + t("On a node without an NVIDIA driver there are no GPUs to show."))
        return Text(t("No topology facts yet: the 'topology' probe has not run (r on the "
                      "Environment step runs it)."))
    from distdoctor.probes.topology import draw_text

    try:
        return Text(draw_text(facts, width=width), no_wrap=True)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        # facts from another distdoctor version (a resumed session): say so, do not crash
        return Text(t("ERROR: cannot draw these topology facts ({error}); "
                      "r on the Environment step probes the topology again.", error=f"{type(exc).__name__}: {exc}"))


class TopologyScreen(ModalScreen[None]):
    """GPUs, NICs, links and the P2P advice, as text (fits an SSH terminal)."""

    BINDINGS = [Binding("escape,q,t", "dismiss", "Close")]

    def __init__(self, facts: dict[str, Any], status: str = "", reason: str = "") -> None:
        super().__init__()
        if resolve() != "en":
            localise_bindings(self)
        self.facts, self.status, self.reason = facts, status, reason

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="modal-box") as box:
            box.border_title = t("GPU topology")
            yield Plain(id="topology-text")
        yield Footer()

    def on_mount(self) -> None:
        width = max(40, self.app.size.width - 8)
        self.query_one("#topology-text", Static).update(
            topology_text(self.facts, width, self.status, self.reason))


class FleetScreen(ModalScreen[None]):
    """Load snapshots (`distdoctor collect`) of other nodes and show the odd node out."""

    BINDINGS = [Binding("escape", "dismiss", "Close")]

    def __init__(self) -> None:
        super().__init__()
        if resolve() != "en":
            localise_bindings(self)

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="modal-box") as box:
            box.border_title = t("Fleet: compare node snapshots")
            yield Plain(t("Snapshot files or a folder of them (from `distdoctor collect`):"))
            with Horizontal(classes="row"):
                yield Input(placeholder="./snapshots/", suggester=PathSuggester(), id="fleet-path")
                yield Button(t("Compare"), id="compare")
            yield Plain("", id="fleet-status")
            yield DataTable(id="outliers", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#fleet-path", Input).focus()  # typing goes straight into the path
        self.query_one("#outliers", DataTable).add_columns(t("Node"), t("Field"), t("Value"), t("Most nodes"))
        previous = getattr(self.app, "flow", None)
        if previous is not None and previous.events.get("fleet"):
            self._show(previous.events["fleet"])

    @on(Input.Submitted, "#fleet-path")
    @on(Button.Pressed, "#compare")
    def _compare(self) -> None:
        path = self.query_one("#fleet-path", Input).value.strip()
        if not path:  # Enter that did nothing looked broken: say what to type
            self.query_one("#fleet-status", Static).update(Text.assemble(
                (t("Type a path first: "), "bold"), t(
                    "a folder of snapshots or one snapshot file, e.g. ./snapshots/ . Make them on each "
                    "node with `distdoctor collect -o snapshots/$(hostname).json`, or all at once with "
                    "`distdoctor fleet collect --via ssh --hostfile hosts.txt -o snapshots/`.")))
            return
        self.query_one("#fleet-status", Static).update(t("Comparing..."))
        self.compare(path)

    @work(thread=True, exclusive=True, exit_on_error=False, group="fleet", description="compare snapshots")
    def compare(self, typed: str) -> None:
        paths = [os.path.expanduser(typed)]
        if not os.path.exists(paths[0]):  # here, not in the UI: a hung network mount blocks a stat
            self.post_message(FleetCompared(None, paths, t("no such file or folder: {path}", path=typed)))
            return
        from distdoctor.probes.fleet import compare, load_snapshots

        records, skipped = load_snapshots(paths)
        if not records:
            reasons = "; ".join(f"{s.get('file')}: {s.get('reason')}" for s in skipped[:3])
            self.post_message(FleetCompared(None, paths, t("no readable snapshot ({reasons})",
                                                           reasons=reasons or t("none found"))))
            return
        self.post_message(FleetCompared(compare(records, skipped), paths))

    def on_fleet_compared(self, message: FleetCompared) -> None:
        if message.error or message.result is None:
            self.query_one("#fleet-status", Static).update(Text(t("ERROR {why}", why=message.error), style="bold"))
            return
        record = getattr(self.app, "record", None)
        if record:
            record("fleet", {**message.result, "paths": message.paths})
        self._show(message.result)

    def _show(self, result: dict[str, Any]) -> None:
        from distdoctor.probes.fleet.compare import label, show

        outliers = result.get("outliers") or []
        skipped = result.get("skipped") or []
        status = t("{n} node(s): ", n=result.get("nodes", 0))
        status += t("{n} odd value(s) out", n=len(outliers)) if outliers else t("OK, every compared field agrees")
        if skipped:
            status += t("; {n} file(s) skipped:", n=len(skipped))
            for item in skipped[:3]:
                if isinstance(item, dict):
                    status += f"\n  {item.get('file', '?')}: {item.get('reason', '?')}"
                else:
                    status += f"\n  {item}"
            if len(skipped) > 3:
                status += "\n  " + t("and {n} more", n=len(skipped) - 3)
        self.query_one("#fleet-status", Static).update(status)
        table = self.query_one("#outliers", DataTable)
        table.clear()
        for o in outliers:
            field = str(o.get("field", ""))
            count = f"{o.get('count', '?')}{t(', a tie') if o.get('tie') else ''}"
            table.add_row(str(o.get("node", "")), label(field), show(field, o.get("value")),
                          f"{show(field, o.get('majority'))} ({count})")
