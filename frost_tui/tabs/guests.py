"""Tab 2, Guests: the tasks this machine hosts, their progress and the work at risk."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from frost_core import GuestView, NodeSnapshot

from frost_tui.widgets.format import format_bytes, format_duration, progress_bar, styled_state
from frost_tui.widgets.live_table import LiveTable
from frost_tui.widgets.redraw import update_static
from frost_tui.tabs.pane import Pane

# An evicted guest has the evict deadline (under a second) to checkpoint; one whose step is longer
# is stopped and starts again from its last checkpoint. Work worth asking about before that: a minute.
WORK_WORTH_ASKING_SECONDS = 60.0
COLUMNS = ("Task", "Assignment", "Plugin", "Origin", "Progress", "CPU time", "At risk", "Memory", "State")
# At 80 columns these make way first: Task, Progress, At risk and State always show.
DROP_ORDER = (1, 3, 7, 2, 5)


class GuestsPane(Pane):
    """One row per guest; the detail pane says which policy rule last acted on it and why."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._guests: dict[str, GuestView] = {}

    def compose(self) -> ComposeResult:
        yield LiveTable(*COLUMNS, id="guests-table", drop_order=DROP_ORDER)
        yield Static("No guest selected.", id="guest-detail", classes="detail")

    def show(self, snapshot: NodeSnapshot, now: float) -> None:
        self._guests = {g.task_id: g for g in snapshot.guests}
        self.query_one(LiveTable).show_rows([(g.task_id, guest_row(g)) for g in snapshot.guests])
        self._show_detail()

    def selected_guest(self) -> GuestView | None:
        key = self.query_one(LiveTable).selected_key()
        return self._guests.get(key) if key else None

    def details(self) -> tuple[str, Table] | None:
        guest = self.selected_guest()
        return (f"Guest {guest.task_id}", describe_guest(guest)) if guest else None

    def on_live_table_row_highlighted(self, event: LiveTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        guest = self.selected_guest()
        if guest is not None:
            text = lambda: describe_guest(guest)  # noqa: E731
        elif self._guests:
            text = lambda: "No guest selected."  # noqa: E731
        else:
            text = lambda: "No guests: this machine is not running anyone's work."  # noqa: E731
        update_static(self.query_one("#guest-detail", Static), (guest, bool(self._guests)), text, layout=False)


def guest_row(guest: GuestView) -> tuple:
    at_risk = Text(format_duration(guest.since_checkpoint_seconds))
    if guest.cpu_since_checkpoint_seconds > 300:
        at_risk.stylize("yellow")
    return (
        guest.task_id,
        guest.assignment_id,
        guest.plugin,
        guest.origin,
        progress_bar(guest.progress),
        format_duration(guest.cpu_seconds),
        at_risk,
        format_bytes(guest.memory_bytes),
        styled_state(guest.state),
    )


def work_lost_by_evicting(guest: GuestView) -> str | None:
    """What evicting this guest may throw away, said to the owner; None when that is little."""
    if guest.checkpoint_bytes == 0:
        return (f"{guest.task_id} has no checkpoint yet: unless it checkpoints within the evict deadline, "
                f"its {format_duration(guest.cpu_seconds)} of CPU work start again from nothing elsewhere.")
    if guest.cpu_since_checkpoint_seconds >= WORK_WORTH_ASKING_SECONDS:
        return (f"{guest.task_id} last checkpointed {format_duration(guest.since_checkpoint_seconds)} ago: if its "
                f"step does not end within the evict deadline, the "
                f"{format_duration(guest.cpu_since_checkpoint_seconds)} of CPU work since then are lost.")
    return None


def describe_guest(guest: GuestView) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("Task", f"{guest.task_id}  ({guest.plugin}, from {guest.origin})")
    table.add_row("Progress", progress_bar(guest.progress, width=20))
    table.add_row(
        "Time", f"{format_duration(guest.cpu_seconds)} CPU in {format_duration(guest.wall_seconds)} wall",
    )
    table.add_row(
        "Work at risk",
        f"{format_duration(guest.cpu_since_checkpoint_seconds)} CPU since the last checkpoint "
        f"({format_bytes(guest.checkpoint_bytes)}, {format_duration(guest.since_checkpoint_seconds)} ago)",
    )
    table.add_row("Policy", guest.explanation or "no rule has acted on this guest yet")
    return table
