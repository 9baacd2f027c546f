"""What every tab shares: it draws itself from one node snapshot and the current time."""

from __future__ import annotations

from textual.containers import Vertical

from frost_core import NodeSnapshot


class Pane(Vertical):
    """A tab's content; `show` is called with each new snapshot while the tab is visible."""

    def show(self, snapshot: NodeSnapshot, now: float) -> None:
        raise NotImplementedError

    def focus_main(self) -> None:
        """Give the keyboard to this tab's main table, so arrow keys move its cursor at once."""
        for widget in self.query("LiveTable, Input, Switch"):
            if widget.focusable:
                widget.focus()
                return

    def focus_filter(self) -> bool:
        """Put the cursor in this tab's filter box; False when the tab has none."""
        return False
