"""What every tab shares: it draws itself from one node snapshot and the current time."""

from __future__ import annotations

from rich.console import RenderableType
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Input

from frost_core import NodeSnapshot

from frost_tui.widgets.live_table import LiveTable


class Pane(Vertical):
    """A tab's content; `show` is called with each new snapshot while the tab is visible."""

    def show(self, snapshot: NodeSnapshot, now: float) -> None:
        raise NotImplementedError

    def main_widget(self) -> Widget | None:
        """What gets the keyboard when the tab is shown: its main table, so arrow keys move its
        cursor at once. Never a text field: a digit typed there is text, and the owner pressed it
        to switch tabs. None: the tab bar keeps the keyboard."""
        return next(iter(self.query(LiveTable)), None)

    def filter_box(self) -> Input | None:
        """This tab's `/` filter (an Input whose id ends in -filter), if it has one."""
        return next((box for box in self.query(Input) if box.id and box.id.endswith("-filter")), None)

    def filter_applied(self) -> bool:
        """Whether the tab lists less than it would without the owner's `/` (Esc then undoes it)."""
        box = self.filter_box()
        return box is not None and box.value != ""

    def back_out(self) -> None:
        """Esc: clear this tab's filter (never left applied unseen); the app gives the keys back to the tab."""
        box = self.filter_box()
        if box is not None:
            box.value = ""

    def details(self) -> tuple[str, RenderableType] | None:
        """Enter: a title and everything known about the selected row; None when nothing is selected."""
        return None
