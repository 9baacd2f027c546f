"""Textual's footer, rebuilt only when the keys it shows change."""

from __future__ import annotations

from textual.widgets import Footer


class KeysFooter(Footer):
    """Textual's footer rebuilds its row of keys (a widget each) whenever the screen's bindings are updated: twice
    per tab switch here, though most tabs show the same keys. That rebuild was 60 % of a switch's CPU (70 of
    120 ms on a 2-vCPU VM); a switch between tabs that show the same keys now skips it."""

    _shown: tuple | None = None

    async def recompose(self) -> None:
        shown = self._keys_shown()
        if shown == self._shown:
            return
        self._shown = shown
        await super().recompose()

    def _keys_shown(self) -> tuple:
        """What `compose` would show: each shown binding, whether it is enabled, its tooltip and its group, and
        the command palette's key."""
        bindings = self.screen.active_bindings
        return tuple((binding.key, binding.action, binding.description, enabled, tooltip,
                      binding.group and binding.group.description)
                     for _node, binding, enabled, tooltip in bindings.values()
                     if binding.show or binding.key == self.app.COMMAND_PALETTE_BINDING)
