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

from ..messages import FleetCompared
from ..widgets import PathSuggester, Plain


def topology_text(facts: dict[str, Any], width: int) -> Text:
    """draw_text of the topology probe's facts, or why there is nothing to draw."""
    if not facts:
        return Text("No topology facts yet: the 'topology' probe has not run (r on the "
                    "Environment step runs it).")
    try:
        from distdoctor.probes.topology import draw_text
    except ImportError as exc:
        return Text(f"topology view not available: {exc}")
    return Text(draw_text(facts, width=width), no_wrap=True)


class TopologyScreen(ModalScreen[None]):
    """GPUs, NICs, links and the P2P advice, as text (fits an SSH terminal)."""

    BINDINGS = [Binding("escape,q,t", "dismiss", "Close")]

    def __init__(self, facts: dict[str, Any]) -> None:
        super().__init__()
        self.facts = facts

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="modal-box") as box:
            box.border_title = "GPU topology"
            yield Plain(id="topology-text")
        yield Footer()

    def on_mount(self) -> None:
        width = max(40, self.app.size.width - 8)
        self.query_one("#topology-text", Static).update(topology_text(self.facts, width))


class FleetScreen(ModalScreen[None]):
    """Load snapshots (`distdoctor collect`) of other nodes and show the odd node out."""

    BINDINGS = [Binding("escape", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="modal-box") as box:
            box.border_title = "Fleet: compare node snapshots"
            yield Plain("Snapshot files or a folder of them (from `distdoctor collect`):")
            with Horizontal(classes="row"):
                yield Input(placeholder="./snapshots/", suggester=PathSuggester(), id="fleet-path")
                yield Button("Compare", id="compare")
            yield Plain("", id="fleet-status")
            yield DataTable(id="outliers", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#outliers", DataTable).add_columns("Node", "Field", "Value", "Most nodes")
        previous = getattr(self.app, "flow", None)
        if previous is not None and previous.events.get("fleet"):
            self._show(previous.events["fleet"])

    @on(Input.Submitted, "#fleet-path")
    @on(Button.Pressed, "#compare")
    def _compare(self) -> None:
        path = self.query_one("#fleet-path", Input).value.strip()
        if not path:
            return
        if not os.path.exists(os.path.expanduser(path)):
            self.query_one("#fleet-status", Static).update(f"ERROR no such file or folder: {path}")
            return
        self.query_one("#fleet-status", Static).update("Comparing...")
        self.compare([os.path.expanduser(path)])

    @work(thread=True, exclusive=True, exit_on_error=False, group="fleet", description="compare snapshots")
    def compare(self, paths: list[str]) -> None:
        try:
            from distdoctor.probes.fleet import compare, load_snapshots
        except ImportError as exc:
            self.post_message(FleetCompared(None, paths, f"fleet view not available: {exc}"))
            return
        records, skipped = load_snapshots(paths)
        if not records:
            reasons = "; ".join(f"{s.get('file')}: {s.get('reason')}" for s in skipped[:3])
            self.post_message(FleetCompared(None, paths, f"no readable snapshot ({reasons or 'none found'})"))
            return
        self.post_message(FleetCompared(compare(records, skipped), paths))

    def on_fleet_compared(self, message: FleetCompared) -> None:
        if message.error or message.result is None:
            self.query_one("#fleet-status", Static).update(Text(f"ERROR {message.error}", style="bold"))
            return
        record = getattr(self.app, "record", None)
        if record:
            record("fleet", {**message.result, "paths": message.paths})
        self._show(message.result)

    def _show(self, result: dict[str, Any]) -> None:
        try:
            from distdoctor.probes.fleet.compare import label, show
        except ImportError:  # a recorded fleet event shown by a build without the fleet view
            label, show = str, (lambda _field, value: str(value))  # noqa: E731

        outliers = result.get("outliers") or []
        skipped = result.get("skipped") or []
        status = f"{result.get('nodes', 0)} node(s): "
        status += f"{len(outliers)} odd value(s) out" if outliers else "OK, every compared field agrees"
        if skipped:
            status += f"; {len(skipped)} file(s) skipped"
        self.query_one("#fleet-status", Static).update(status)
        table = self.query_one("#outliers", DataTable)
        table.clear()
        for o in outliers:
            field = str(o.get("field", ""))
            table.add_row(str(o.get("node", "")), label(field), show(field, o.get("value")),
                          f"{show(field, o.get('majority'))} ({o.get('count', '?')})")
