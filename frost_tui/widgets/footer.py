"""Textual's footer, holding only whole keys: worded shorter, then the least needed left out, when narrow."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from textual import events
from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey  # the one widget the footer is made of; Textual exports no other name

KEY_PADDING = 3
"""Columns a key takes beyond its key and its label: one before the key, one after it, one after the label.
(The command palette's key, docked right, takes as many: a border, a space between, one after.)"""


@dataclass(frozen=True)
class FooterEntry:
    """One key as the footer would show it; `rank` 0 is never left out, higher ranks go first."""

    key_display: str
    label: str
    short: str
    rank: int

    def width(self, label: str) -> int:
        return len(self.key_display) + len(label) + KEY_PADDING


def fit_keys(entries: Sequence[FooterEntry], width: int) -> list[tuple[int, str]]:
    """The keys that fit in `width` columns, as (index, label) in their order: all of them with their labels if
    they fit, else with their short labels, else without the highest ranks (the later first among equals).

    A footer cut mid-word (an 80-column terminal used to end in "f Finish+pau") hides the keys it cuts and makes
    the rest hard to read; htop's and k9s's fit theirs. What is left out is on the help screen (?)."""
    for labels in ([entry.label for entry in entries], [entry.short for entry in entries]):
        if sum(entry.width(label) for entry, label in zip(entries, labels)) <= width:
            return list(enumerate(labels))
    kept = set(range(len(entries)))
    used = sum(entries[index].width(labels[index]) for index in kept)
    for index in sorted(kept, key=lambda index: (entries[index].rank, index), reverse=True):
        if used <= width or entries[index].rank == 0:
            break
        kept.discard(index)
        used -= entries[index].width(labels[index])
    return [(index, labels[index]) for index in sorted(kept)]


class KeysFooter(Footer):
    """The footer of `fit_keys`, rebuilt only when the keys it shows or its width change.

    `short` gives an action a shorter label and `rank` its place in what is left out first (see `FooterEntry`;
    an action not named ranks 1), both keyed by the action's name without its "app." namespace.

    Textual's footer rebuilds its row of keys (a widget each) whenever the screen's bindings are updated: twice
    per tab switch here, though most tabs show the same keys. That rebuild was 60 % of a switch's CPU (70 of
    120 ms on a 2-vCPU VM); a switch between tabs that show the same keys skips it."""

    _shown: tuple | None = None

    def __init__(self, *, short: Mapping[str, str], rank: Mapping[str, int]) -> None:
        super().__init__()
        self._short = short
        self._rank = rank

    def compose(self) -> ComposeResult:
        keys = list(super().compose())
        entries = [self._entry(key) for key in keys]
        for index, label in fit_keys(entries, self._width()):
            keys[index].description = label
            yield keys[index]

    async def recompose(self) -> None:
        shown = self._keys_shown()
        if shown == self._shown:
            return
        self._shown = shown
        await super().recompose()

    def on_resize(self, event: events.Resize) -> None:
        if self._shown is not None and self._shown[0] != event.size.width:
            self.call_after_refresh(self.recompose)

    def _entry(self, key: FooterKey) -> FooterEntry:
        action = key.action.removeprefix("app.")
        return FooterEntry(key.key_display, key.description, self._short.get(action, key.description),
                           self._rank.get(action, 1))

    def _width(self) -> int:
        """The footer spans the screen; before its first layout only the app knows how wide that is."""
        return self.size.width or self.app.size.width

    def _keys_shown(self) -> tuple:
        """What `compose` would be given: the width, then each shown binding, whether it is enabled, its tooltip
        and its group, and the command palette's key."""
        bindings = self.screen.active_bindings
        return (self._width(), *((binding.key, binding.action, binding.description, enabled, tooltip,
                                  binding.group and binding.group.description)
                                 for _node, binding, enabled, tooltip in bindings.values()
                                 if binding.show or binding.key == self.app.COMMAND_PALETTE_BINDING))
