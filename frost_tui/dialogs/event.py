"""One event in full: a long message the Events table cuts at its edge, and how often it repeated."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from frost_core import EventView

from frost_tui.widgets.format import format_clock


class EventDialog(ModalScreen[None]):
    """Enter on an Events line opens it; escape or enter closes it."""

    BINDINGS = [Binding("escape", "close", "Close"), Binding("enter", "close", "Close", show=False)]

    def __init__(self, event: EventView, *, first_at: float, count: int) -> None:
        super().__init__()
        self.event = event
        self.first_at = first_at
        self.count = count

    def compose(self) -> ComposeResult:
        event = self.event
        when = format_clock(event.at)
        if self.count > 1:
            when = f"{self.count} times from {format_clock(self.first_at)} to {when}"
        with Vertical(classes="dialog", id="event-dialog"):
            yield Label(event.title or f"{event.kind} event", classes="dialog-title")
            yield Label(f"{when}  ·  {event.kind}  ·  {event.severity}")
            with VerticalScroll(id="event-message", can_focus=False):
                yield Static(event.message, markup=False)
            yield Label("Press escape to close.", classes="setting-doc")

    def action_close(self) -> None:
        self.dismiss(None)
