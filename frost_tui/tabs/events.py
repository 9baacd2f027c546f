"""Tab 6, Events: what happened in the cluster and on this machine, newest first, filterable."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Input

from frost_core import EventView, NodeSnapshot

from frost_tui.widgets.format import format_clock, styled_state
from frost_tui.widgets.live_table import LiveTable
from frost_tui.tabs.pane import Pane

COLUMNS = ("Time", "Kind", "Severity", "Message")


class EventsPane(Pane):
    """The filter matches kind, severity, title or message text ("evict", "error", a node name)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._snapshot: NodeSnapshot | None = None

    def compose(self) -> ComposeResult:
        yield Input(placeholder="/ filter events: kind, severity or words in the message", id="events-filter")
        yield LiveTable(*COLUMNS, id="events-table")

    def show(self, snapshot: NodeSnapshot, now: float) -> None:
        self._snapshot = snapshot
        needle = self.query_one("#events-filter", Input).value.strip().lower()
        shown = [e for e in reversed(snapshot.events) if matches(e, needle)]
        table = self.query_one(LiveTable)
        table.show_rows([(key, event_row(e)) for key, e in zip(event_keys(shown), shown)])
        subtitle = f"{len(shown)} of {len(snapshot.events)}"
        if table.border_subtitle != subtitle:  # setting it repaints the whole table, even to the same text
            table.border_subtitle = subtitle

    def focus_main(self) -> None:
        self.query_one(LiveTable).focus()

    def focus_filter(self) -> bool:
        self.query_one("#events-filter", Input).focus()
        return True

    def on_input_changed(self, event: Input.Changed) -> None:
        if self._snapshot is not None:
            self.show(self._snapshot, 0.0)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(LiveTable).focus()


def matches(event: EventView, needle: str) -> bool:
    if not needle:
        return True
    return any(needle in field.lower() for field in (event.kind, event.severity, event.title, event.message))


def event_keys(events: list[EventView]) -> list[str]:
    """Stable row keys; two identical events in the same instant get a counter."""
    seen: dict[str, int] = {}
    keys = []
    for event in events:
        base = f"{event.at!r}|{event.kind}|{event.message}"
        seen[base] = seen.get(base, 0) + 1
        keys.append(f"{base}|{seen[base]}")
    return keys


def event_row(event: EventView) -> tuple:
    message = Text(event.message)
    if event.title:
        message = Text.assemble((event.title + ": ", "bold"), event.message)
    return (format_clock(event.at), event.kind, styled_state(event.severity), message)
