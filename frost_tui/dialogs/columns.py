"""Pick a table's columns, as htop's F2 and k9s's column settings let their users: the choice is kept between runs."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, SelectionList


class ColumnsDialog(ModalScreen[frozenset[str]]):
    """Space or enter shows or hides the column under the cursor; escape closes with the columns hidden then.

    Only the columns a narrow window may drop are offered: those that say what state a thing is in stay."""

    BINDINGS = [Binding("escape,v", "close", "Close")]

    def __init__(self, table_title: str, hideable: tuple[str, ...], hidden: frozenset[str]) -> None:
        super().__init__()
        self.table_title = table_title
        self.hideable = hideable
        self.hidden = hidden

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Columns of {self.table_title}", classes="dialog-title")
            yield Label("space shows or hides one · escape closes · kept for next time")
            yield SelectionList[str](*((title, title, title not in self.hidden) for title in self.hideable),
                                     id="columns-list")

    def action_close(self) -> None:
        shown = set(self.query_one(SelectionList).selected)
        self.dismiss(frozenset(title for title in self.hideable if title not in shown))
