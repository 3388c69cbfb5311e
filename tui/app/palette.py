"""Command palette entries (ctrl+p) for every action of the app, from the app's own list."""
from __future__ import annotations

from textual.command import DiscoveryHit, Hit, Hits, Provider


class DistDoctorCommands(Provider):
    """Searches the app's `palette_commands()`: steps, learn mode, probes, runs, export."""

    def _commands(self) -> list:
        commands = getattr(self.app, "palette_commands", None)
        return commands() if commands else []

    async def discover(self) -> Hits:
        for name, help_, callback in self._commands():
            yield DiscoveryHit(name, callback, help=help_)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_, callback in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, text=name, help=help_)
