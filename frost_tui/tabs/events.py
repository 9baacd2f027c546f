"""Tab 6, Events: what happened in the cluster and on this machine, newest first, filterable."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Input

from frost_core import EventView, NodeSnapshot

from frost_tui.widgets.format import format_clock, styled_state
from frost_tui.widgets.live_table import LiveTable
from frost_tui.tabs.pane import Pane

COLUMNS = ("Time", "Kind", "Severity", "Message")


@dataclass(frozen=True)
class EventLine:
    """One row of the table: an event and how many times in a row it happened (×12)."""

    event: EventView     # the newest of the run
    first_at: float      # when the run began
    count: int = 1


class EventsPane(Pane):
    """The filter matches kind, severity, title or message text ("evict", "error", a node name).

    The newest line stays in view while the cursor is on it; once the owner moves down to read
    older lines, new ones arrive above without taking the cursor away. Enter opens a line in full.
    """

    BINDINGS = [Binding("slash", "app.filter", "Filter")]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._snapshot: NodeSnapshot | None = None
        self._lines: dict[str, EventLine] = {}

    def compose(self) -> ComposeResult:
        yield Input(placeholder="/ filter events: kind, severity or words in the message", id="events-filter")
        yield LiveTable(*COLUMNS, id="events-table")

    def show(self, snapshot: NodeSnapshot, now: float) -> None:
        self._snapshot = snapshot
        needle = self.query_one("#events-filter", Input).value.strip().lower()
        lines = collapse([e for e in reversed(snapshot.events) if matches(e, needle)])
        self._lines = dict(zip(line_keys(lines), lines))
        table = self.query_one(LiveTable)
        following = table.cursor_row == 0  # on the newest line: stay on the newest
        table.show_rows([(key, event_row(line)) for key, line in self._lines.items()])
        if following and table.cursor_row != 0:
            table.cursor_row = 0
        shown = sum(line.count for line in lines)
        subtitle = f"{shown} of {len(snapshot.events)}"
        if table.border_subtitle != subtitle:  # setting it repaints the whole table, even to the same text
            table.border_subtitle = subtitle

    def selected_line(self) -> EventLine | None:
        key = self.query_one(LiveTable).selected_key()
        return self._lines.get(key) if key else None

    def details(self) -> tuple[str, Text] | None:
        """The selected line in full: the message the table cuts at its edge, and how often it came."""
        line = self.selected_line()
        if line is None:
            return None
        event = line.event
        when = format_clock(event.at)
        if line.count > 1:
            when = f"{line.count} times from {format_clock(line.first_at)} to {when}"
        return event.title or f"{event.kind} event", Text.assemble(
            (f"{when}  ·  {event.kind}  ·  {event.severity}\n\n", "bold"), event.message)

    def on_input_changed(self, event: Input.Changed) -> None:
        if self._snapshot is not None:
            self.show(self._snapshot, 0.0)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(LiveTable).focus()


def matches(event: EventView, needle: str) -> bool:
    if not needle:
        return True
    return any(needle in field.lower() for field in (event.kind, event.severity, event.title, event.message))


def collapse(newest_first: list[EventView]) -> list[EventLine]:
    """Runs of the same event (kind, severity, title and message) become one line with a count."""
    lines: list[EventLine] = []
    for event in newest_first:
        previous = lines[-1] if lines else None
        if previous is not None and _same_event(previous.event, event):
            lines[-1] = EventLine(previous.event, event.at, previous.count + 1)
        else:
            lines.append(EventLine(event, event.at))
    return lines


def line_keys(lines: list[EventLine]) -> list[str]:
    """Stable row keys: a run is known by when it began, so a new repeat keeps its row (and cursor)."""
    seen: dict[str, int] = {}
    keys = []
    for line in lines:
        base = f"{line.first_at!r}|{line.event.kind}|{line.event.message}"
        seen[base] = seen.get(base, 0) + 1
        keys.append(f"{base}|{seen[base]}")
    return keys


def event_row(line: EventLine) -> tuple:
    event = line.event
    message = Text(event.message)
    if event.title:
        message = Text.assemble((event.title + ": ", "bold"), event.message)
    if line.count > 1:
        message = Text.assemble((f"×{line.count} ", "bold"), message)
    return (format_clock(event.at), event.kind, styled_state(event.severity), message)


def _same_event(a: EventView, b: EventView) -> bool:
    return (a.kind, a.severity, a.title, a.message) == (b.kind, b.severity, b.title, b.message)
