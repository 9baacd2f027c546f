"""What every tab shares: it draws itself from one node snapshot and the current time."""

from __future__ import annotations

from rich.console import RenderableType
from textual.containers import Vertical
from textual.widgets import Input

from frost_core import NodeSnapshot

from frost_tui.widgets.live_table import LiveTable


class Pane(Vertical):
    """A tab's content; `show` is called with each new snapshot while the tab is visible."""

    def show(self, snapshot: NodeSnapshot, now: float) -> None:
        raise NotImplementedError

    def focus_main(self) -> None:
        """Give the keyboard to this tab's main table, so arrow keys move its cursor at once.

        Never to a text field: a digit typed there is text, and the owner pressed it to switch tabs.
        """
        for table in self.query(LiveTable):
            table.focus()
            return

    def back_out(self) -> None:
        """Esc: clear this tab's filter (never left applied unseen) and hand the keys back to the tab."""
        for box in self.query(Input):
            if box.id and box.id.endswith("-filter"):
                box.value = ""
        self.focus_main()

    def details(self) -> tuple[str, RenderableType] | None:
        """Enter: a title and everything known about the selected row; None when nothing is selected."""
        return None

    def focus_filter(self) -> bool:
        """Put the cursor in this tab's filter box; False when the tab has none."""
        return False
