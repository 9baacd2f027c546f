"""The command palette's frost commands: going somewhere ranks above doing something, and the
destructive ones ask first (a palette's Enter must not evict work the owner only searched for)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from textual.command import DiscoveryHit, Hit, Hits, Provider

# Added to a navigation command's match (0…1): "Guests" finds "Show Guests" before "Evict all guests".
NAVIGATION_BONUS = 1.0


@dataclass(frozen=True)
class PaletteCommand:
    name: str
    help: str
    run: Callable[[], object]
    navigation: bool = False


class FrostCommands(Provider):
    """The app's own commands (`FrostApp.palette_commands`), navigation first."""

    def _commands(self) -> list[PaletteCommand]:
        return sorted(self.app.palette_commands(), key=lambda c: not c.navigation)

    async def discover(self) -> Hits:
        for command in self._commands():
            yield DiscoveryHit(command.name, command.run, help=command.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command in self._commands():
            if (score := matcher.match(command.name)) > 0:
                bonus = NAVIGATION_BONUS if command.navigation else 0.0
                yield Hit(score + bonus, matcher.highlight(command.name), command.run, help=command.help)
