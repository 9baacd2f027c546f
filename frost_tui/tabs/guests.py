"""Tab 2, Guests: the tasks this machine hosts, their progress and the work at risk; flat, or as a tree
of assignments with each one's totals (htop's and btop's tree view: t)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Static

from frost_core import GuestView, NodeSnapshot, counted

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
GROUP = "assignment "   # a tree's assignment row is keyed by this and the assignment's id (a task id has no space)


class GuestsPane(Pane):
    """One row per guest, or (tree) one per assignment with its guests under it; the detail pane says which
    policy rule last acted on a guest and why, or what an assignment's guests add up to."""

    BINDINGS = [Binding("t", "toggle_tree", "Tree"), Binding("v", "app.choose_columns", "Columns"),
                Binding("x", "app.evict_selected", "Evict guest"), Binding("m", "app.move", "Move"),
                Binding("minus", "fold", "Fold", show=False),
                Binding("asterisk", "fold_all", "Fold all", show=False)]

    class TreeToggled(Message):
        """The owner switched between the flat list and the tree (kept between runs)."""

        def __init__(self, tree: bool) -> None:
            super().__init__()
            self.tree = tree

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._guests: dict[str, GuestView] = {}
        self._groups: dict[str, list[GuestView]] = {}
        self.as_tree = False
        self._folded: set[str] = set()   # assignments whose guests the tree hides
        self._snapshot: NodeSnapshot | None = None
        self._now = 0.0

    def compose(self) -> ComposeResult:
        yield LiveTable(*COLUMNS, id="guests-table", drop_order=DROP_ORDER)
        yield Static("No guest selected.", id="guest-detail", classes="detail")

    def show(self, snapshot: NodeSnapshot, now: float) -> None:
        self._snapshot, self._now = snapshot, now
        self._guests = {g.task_id: g for g in snapshot.guests}
        self._groups = by_assignment(snapshot.guests)
        self._folded &= self._groups.keys()
        table = self.query_one(LiveTable)
        if self.as_tree:
            table.show_rows(tree_rows(self._groups, self._folded))
        else:
            table.show_rows([(g.task_id, guest_row(g)) for g in snapshot.guests])
        subtitle = f"by assignment: {counted(len(self._groups), 'assignment')} · t flat list" if self.as_tree else ""
        if table.border_subtitle != subtitle:
            table.border_subtitle = subtitle
        self._show_detail()

    def selected_guest(self) -> GuestView | None:
        key = self.query_one(LiveTable).selected_key()
        return self._guests.get(key) if key else None

    def selected_group(self) -> str | None:
        """The assignment whose tree row is selected, or whose guest is."""
        key = self.query_one(LiveTable).selected_key() or ""
        if key.startswith(GROUP):
            return key[len(GROUP):]
        guest = self._guests.get(key)
        return guest.assignment_id if guest else None

    def details(self) -> tuple[str, Table] | None:
        guest = self.selected_guest()
        if guest is not None:
            return f"Guest {guest.task_id}", describe_guest(guest)
        group = self.selected_group()
        return (f"Assignment {group} here", describe_group(self._groups[group])) if group in self._groups else None

    def action_toggle_tree(self) -> None:
        self.as_tree = not self.as_tree
        self.post_message(self.TreeToggled(self.as_tree))
        self._redraw()

    def action_fold(self) -> None:
        """Hide the selected assignment's guests under its row, or show them again."""
        group = self.selected_group() if self.as_tree else None
        if group is None:
            return
        self._folded ^= {group}
        self.query_one(LiveTable).select_key(GROUP + group)
        self._redraw()

    def action_fold_all(self) -> None:
        """Fold every assignment, or unfold them all once all are folded."""
        if not self.as_tree:
            return
        self._folded = set() if self._folded >= self._groups.keys() else set(self._groups)
        group = self.selected_group()
        if group is not None:
            self.query_one(LiveTable).select_key(GROUP + group)
        self._redraw()

    def on_live_table_row_highlighted(self, event: LiveTable.RowHighlighted) -> None:
        self._show_detail()

    def _redraw(self) -> None:
        if self._snapshot is not None:
            self.show(self._snapshot, self._now)

    def _show_detail(self) -> None:
        guest = self.selected_guest()
        group = self.selected_group() if guest is None else None
        if guest is not None:
            text = lambda: describe_guest(guest)  # noqa: E731
        elif group in self._groups:
            members = tuple(self._groups[group])
            text = lambda: describe_group(members)  # noqa: E731
        elif self._guests:
            text = lambda: "No guest selected."  # noqa: E731
        else:
            text = lambda: "No guests: this machine is not running anyone's work."  # noqa: E731
        shown = (guest, tuple(self._groups.get(group, ())) if group else None, bool(self._guests))
        update_static(self.query_one("#guest-detail", Static), shown, text, layout=False)


def by_assignment(guests: tuple[GuestView, ...]) -> dict[str, list[GuestView]]:
    """The guests of each assignment, in the order the first of each is listed."""
    groups: dict[str, list[GuestView]] = {}
    for guest in guests:
        groups.setdefault(guest.assignment_id, []).append(guest)
    return groups


def tree_rows(groups: dict[str, list[GuestView]], folded: set[str]) -> list[tuple[str, tuple]]:
    """Each assignment's row of totals, then its guests (indented) unless it is folded."""
    rows: list[tuple[str, tuple]] = []
    for assignment_id, members in groups.items():
        rows.append((GROUP + assignment_id, group_row(assignment_id, members, folded=assignment_id in folded)))
        if assignment_id not in folded:
            rows += [(g.task_id, ("  " + g.task_id, *guest_row(g)[1:])) for g in members]
    return rows


def group_row(assignment_id: str, members: Sequence[GuestView], *, folded: bool) -> tuple:
    """An assignment's guests rolled up: their mean progress, their CPU time and memory summed, the most work one
    of them would lose, and how many are in each state."""
    first = members[0]
    at_risk = max(members, key=lambda g: g.cpu_since_checkpoint_seconds)
    states = Counter(g.state for g in members)
    return (
        Text.assemble("▸ " if folded else "▾ ", (assignment_id, "bold")),
        counted(len(members), "guest"),
        first.plugin,
        first.origin,
        progress_bar(sum(g.progress for g in members) / len(members)),
        format_duration(sum(g.cpu_seconds for g in members)),
        guest_row(at_risk)[6],
        format_bytes(sum(g.memory_bytes for g in members)),
        ", ".join(f"{n} {state}" for state, n in states.most_common()),
    )


def describe_group(members: Sequence[GuestView]) -> Table:
    first = members[0]
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("Assignment", f"{first.assignment_id}  ({first.plugin}, from {first.origin}): "
                                f"{counted(len(members), 'guest')} here")
    table.add_row("Progress", progress_bar(sum(g.progress for g in members) / len(members), width=20))
    table.add_row("Time", f"{format_duration(sum(g.cpu_seconds for g in members))} CPU in all")
    table.add_row("Work at risk", f"{format_duration(sum(g.cpu_since_checkpoint_seconds for g in members))} CPU "
                                  "since their last checkpoints")
    table.add_row("Memory", format_bytes(sum(g.memory_bytes for g in members)))
    return table


def guest_row(guest: GuestView) -> tuple:
    # At risk: the CPU work an eviction now would throw away, as the details and the evict question count it (the wall
    # time since the checkpoint overstates it for a guest that shares its CPU).
    at_risk = Text(format_duration(guest.cpu_since_checkpoint_seconds))
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
    if guest.checkpoint_bytes:
        at_risk = (f"{format_duration(guest.cpu_since_checkpoint_seconds)} CPU since the last checkpoint "
                   f"({format_bytes(guest.checkpoint_bytes)}, {format_duration(guest.since_checkpoint_seconds)} ago)")
    else:   # (it read "since the last checkpoint (0 B, 5s ago)" of one never taken)
        at_risk = f"{format_duration(guest.cpu_seconds)} CPU, all of it: no checkpoint yet"
    table.add_row("Work at risk", at_risk)
    table.add_row("Policy", guest.explanation or "no rule has acted on this guest yet")
    return table
