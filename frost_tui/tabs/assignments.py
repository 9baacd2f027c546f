"""Tab 4, Assignments: the work this machine is master of, per assignment and per unit."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.timer import Timer
from textual.widgets import Static

from frost_core import (
    AssignmentView, FindUnits, FoundUnits, FrostError, GangMemberView, NodeSnapshot, ReadResult, UnitView, counted,
    member_state, member_waited,
)

from frost_tui.dialogs.small import FindDialog
from frost_tui.widgets.format import format_ago, format_duration, progress_bar, styled_state
from frost_tui.widgets.image_preview import ImagePreview
from frost_tui.widgets.live_table import LiveTable
from frost_tui.widgets.redraw import update_static
from frost_tui.tabs.pane import Pane

ASSIGNMENT_COLUMNS = ("Assignment", "Plugin", "State", "Progress", "Units", "Moves", "ETA", "Age")
UNIT_COLUMNS = ("Unit", "State", "Runs on", "Progress", "ETA", "Moves", "Failures", "Error / why waiting")
# At 80 columns the tables drop Age, Moves, Units (assignments) and Failures, Moves, ETA (units) first.
FIND_AGAIN = 2.0
"""Seconds between two asks for the units the owner looks for (`/`), while the answer is on the screen: the
node goes through every unit of the assignment for each, in a worker thread (21 ms of CPU at 10,000 units, 180 ms
at 100,000; a unit's number reads that unit only)."""


class AssignmentsPane(Pane):
    """Select an assignment above to see its units below; a finished one shows its result."""

    # The app's own keys, in the footer where they act (as k9s shows a view's keys first); elsewhere they say why not.
    BINDINGS = [Binding("c", "app.cancel_assignment", "Cancel"), Binding("w", "app.save_result", "Save result"),
                Binding("v", "app.choose_columns", "Columns"), Binding("m", "app.move", "Move"),
                Binding("slash", "app.filter", "Filter")]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._assignments: dict[str, AssignmentView] = {}
        self._now = 0.0
        self._movable = False   # a live peer besides this node: a unit could be moved
        self._files: dict[str, tuple[str, ...]] = {}   # a done assignment's files folder -> its files' names
        self._find: tuple[str, str] | None = None   # (assignment id, words): the units the owner looks for
        self._found: FoundUnits | None = None       # the node's answer to `_find`, until the next one
        self._asked_at = float("-inf")
        self._asking = False
        self._stale = False                          # something changed while the last ask was under way
        self._later: Timer | None = None             # the ask put off by FIND_AGAIN

    def compose(self) -> ComposeResult:
        yield LiveTable(*ASSIGNMENT_COLUMNS, id="assignments-table", drop_order=(7, 5, 4))
        yield LiveTable(*UNIT_COLUMNS, id="units-table", drop_order=(6, 5, 4))
        yield Static(id="assignment-result", classes="detail")
        yield ImagePreview(id="result-preview")

    def show(self, snapshot: NodeSnapshot, now: float) -> None:
        self._now = now
        self._assignments = {a.id: a for a in snapshot.assignments}
        self._movable = any(p.state == "alive" and not p.is_self for p in snapshot.peers)
        newest_first = sorted(snapshot.assignments, key=lambda a: a.created_at, reverse=True)
        self.query_one("#assignments-table", LiveTable).show_rows(
            [(a.id, assignment_row(a, now)) for a in newest_first]
        )
        self._ask_again()
        self._show_units()

    def selected_assignment(self) -> AssignmentView | None:
        key = self.query_one("#assignments-table", LiveTable).selected_key()
        return self._assignments.get(key) if key else None

    def select_assignment(self, assignment_id: str) -> None:
        """Put the cursor on this assignment once it is in the table (the next redraw adds it)."""
        self.query_one("#assignments-table", LiveTable).select_key(assignment_id)

    def selected_unit(self) -> UnitView | None:
        assignment = self.selected_assignment()
        key = self.query_one("#units-table", LiveTable).selected_key()
        if assignment is None or key is None:
            return None
        return next((u for u in self._units_of(assignment) if u.task_id == key), None)

    def find_units(self) -> None:
        """/: which of the selected assignment's units to list; a snapshot carries only SNAPSHOT_UNITS of a long
        sweep's, and the owner looks for the others (the node answers `FindUnits`)."""
        assignment = self.selected_assignment()
        if assignment is None or assignment.gang is not None:
            self.app.notify("Select an assignment first." if assignment is None else "A gang's members are all listed.",
                            title="Find units", severity="warning")
            return
        words = self._find[1] if self._find is not None and self._find[0] == assignment.id else ""
        self.app.push_screen(FindDialog(assignment.id, words), lambda words: self._look_for(assignment.id, words))

    def filter_applied(self) -> bool:
        return self._find is not None

    def back_out(self) -> None:
        """Esc: the units running and waiting again, after a find."""
        if self._find is not None:
            self._look_for(self._find[0], "")

    def _look_for(self, assignment_id: str, words: str | None) -> None:
        if words is None:
            return  # the dialog was cancelled: the list stays as it is
        self._find = (assignment_id, words) if words else None
        self._found, self._asked_at = None, float("-inf")
        self._ask_again()
        self._show_units()
        self.app.refresh_bindings()  # Esc is offered while units are found

    def _ask_again(self) -> None:
        """Ask the node for the units looked for, after each snapshot, but at most every FIND_AGAIN seconds and
        one ask at a time: a snapshot that comes sooner is asked for when the time is up, or when the ask under
        way is answered. Else the last change of a sweep, a few seconds after the one before and followed by no
        other, would leave the list showing units running that are done."""
        find = self._find
        if find is None:
            return
        if self._asking:
            self._stale = True
            return
        wait = self._asked_at + FIND_AGAIN - time.monotonic()
        if wait > 0:
            if self._later is None:
                self._later = self.set_timer(wait, self._ask_later)
            return
        self._asked_at = time.monotonic()
        self._asking = self.app.ask_soon(FindUnits(assignment_id=find[0], match=find[1]),
                                         lambda answer: self._answered(find, answer))

    def _ask_later(self) -> None:
        self._later = None
        self._ask_again()

    def _answered(self, find: tuple[str, str], answer: FoundUnits | FrostError) -> None:
        self._asking = False
        if self._stale:
            self._stale = False
            self._ask_again()
        if find != self._find:
            return  # the owner looks for something else now
        if isinstance(answer, FrostError):
            self._find = self._found = None
            self.app.refresh_bindings()
            self.app.notify(answer.message, title="Units not found", severity="error")
        else:
            self._found = answer
        self._show_units()

    def _units_of(self, assignment: AssignmentView) -> tuple[UnitView, ...]:
        """What the units table lists: the units found for the owner, else those the snapshot carries."""
        looking = self._looking(assignment)
        if looking is None:
            return assignment.units
        return looking[1].units if looking[1] is not None else ()

    def _looking(self, assignment: AssignmentView) -> tuple[str, FoundUnits | None] | None:
        """The words looked for among `assignment`'s units and the answer so far, if the owner looks there."""
        if self._find is None or self._find[0] != assignment.id:
            return None
        return self._find[1], self._found

    def details(self) -> tuple[str, Group] | None:
        """The unit under the cursor when the units table has the keys, else the assignment."""
        assignment = self.selected_assignment()
        if assignment is None:
            return None
        unit = self.selected_unit()
        if unit is not None and self.query_one("#units-table", LiveTable).has_focus:
            return f"Unit {unit.task_id}", describe_unit(unit)
        units = Text("\n".join(f"{u.task_id}  {u.reported or u.state}  {u.host_name or '—'}  {u.error or u.waiting}".rstrip()
                               for u in self._units_of(assignment)))
        if assignment.gang is not None:
            units = Text("\n".join(f"{assignment.id}.{m.rank}  {m.host_name or '—'}  superstep {m.superstep}  "
                                   f"{member_waited(bool(m.host), format_duration(m.waited_seconds))}"
                                   for m in assignment.gang.members))
        return f"Assignment {assignment.id} ({assignment.plugin}, {assignment.state})", Group(
            describe_result(assignment, self._now, self._looking(assignment), movable=self._movable,
                            files=self._output_files(assignment)), Text(""), units)

    def on_live_table_row_highlighted(self, event: LiveTable.RowHighlighted) -> None:
        if event.table.id == "assignments-table":
            self._show_units()

    def _show_units(self) -> None:
        assignment = self.selected_assignment()
        rows = [(u.task_id, unit_row(u)) for u in (self._units_of(assignment) if assignment else ())]
        if assignment is not None and assignment.gang is not None:   # a gang's members stand in for units
            rows = [(f"{assignment.id}.{m.rank}", member_row(assignment.id, m, assignment.gang.phase))
                    for m in assignment.gang.members]
        self.query_one("#units-table", LiveTable).show_rows(rows)
        result = self.query_one("#assignment-result", Static)
        preview = self.query_one(ImagePreview)
        if assignment is None:
            update_static(result, None, lambda: "No assignments yet: press s to submit one.")
            preview.hide()
            return
        gang = assignment.gang
        files = self._output_files(assignment)
        key = (repr(assignment.params), assignment.state, self._movable, assignment.error, assignment.result_path,
               assignment.result_media_type, round(assignment.wasted_seconds), files,
               units_shown(assignment, self._looking(assignment)),
               gang and (gang.phase, gang.reason, gang.checkpoint_superstep, checkpoint_age(gang.checkpoint_at, self._now),
                         gang.moves, gang.restarts))
        update_static(result, key, lambda: describe_result(assignment, self._now, self._looking(assignment),
                                                           movable=self._movable, files=files))
        is_image = assignment.state == "done" and (assignment.result_media_type or "").startswith("image/")
        if not (is_image and assignment.result_path):
            preview.hide()
        elif not self.app.node.link().remote:
            preview.show_file(Path(assignment.result_path))
        elif preview.expect(picture := f"{self.app.node.link().where} {assignment.id}"):
            # The node's copy is a path on its own machine: the picture's bytes come over the link.
            self.app.ask_soon(ReadResult(assignment_id=assignment.id),
                              lambda answer: preview.arrived(picture, answer if isinstance(answer, FrostError)
                                                             else answer.data))

    def _output_files(self, assignment: AssignmentView) -> tuple[str, ...]:
        """The names of a done assignment's output files, where this UI can see them (its node on this machine):
        the node writes them to its results folder as the assignment finishes. The folder appears whole (it is
        renamed into place), so it is listed once: this runs at every snapshot, on the thread the embedded node
        shares, and a sweep's folder may hold thousands of files."""
        folder = assignment.files_folder
        if not folder or self.app.node.link().remote:
            return ()
        if folder not in self._files:
            try:
                self._files[folder] = tuple(sorted(path.name for path in Path(folder).iterdir()))
            except OSError:   # none made, or not exported yet: asked again at the next snapshot
                return ()
        return self._files[folder]


def assignment_row(assignment: AssignmentView, now: float) -> tuple:
    eta = format_duration(assignment.eta_seconds) if assignment.state == "running" else "—"
    gang = assignment.gang
    return (
        assignment.id,
        assignment.plugin,
        styled_state(assignment.state),
        progress_bar(assignment.progress) if gang is None else f"superstep {gang.superstep}",
        units_column(assignment),
        str(assignment.moves if gang is None else gang.moves),
        eta,
        format_duration(now - assignment.created_at),
    )


def units_column(assignment: AssignmentView) -> str:
    """Units done of all, or a gang's size: from its live view, else as stored (an ended gang's view is gone)."""
    if assignment.gang is not None:
        return f"gang of {len(assignment.gang.members)}"
    if assignment.gang_members:
        return f"gang of {assignment.gang_members}"
    return f"{assignment.units_done}/{assignment.unit_count}"


def unit_row(unit: UnitView) -> tuple:
    return (
        unit.task_id,
        styled_state(unit.reported or unit.state),  # as its host reports it: paused, suspended
        unit.host_name or "—",
        progress_bar(unit.progress, width=10),
        format_duration(unit.eta_seconds) if unit.eta_seconds is not None else "—",
        str(unit.moves),
        str(unit.failures),
        Text(unit.error, style="red") if unit.error else Text(unit.waiting, style="yellow"),
    )


def what_cancel_loses(assignment: AssignmentView) -> str:
    """The question before a cancel: what stops and what is thrown away, for units or a gang's members."""
    if assignment.gang is not None:
        gang = assignment.gang
        kept = ("no global checkpoint was taken yet" if gang.checkpoint_superstep is None
                else f"its last global checkpoint (before superstep {gang.checkpoint_superstep}) is deleted")
        members = len(gang.members)
        return (f"{assignment.id} ({assignment.plugin}) stops: its {counted(members, 'member')} "
                f"{'stops' if members == 1 else 'stop'} at superstep {gang.superstep} and the gang's work is thrown "
                f"away; {kept}.")
    done, unfinished = assignment.units_done, assignment.unit_count - assignment.units_done
    if unfinished == 1:
        stopping = "1 unfinished unit stops wherever it runs and its work is thrown away"
    else:
        stopping = f"{unfinished} unfinished units stop wherever they run and their work is thrown away"
    return (f"{assignment.id} ({assignment.plugin}) stops: {stopping}; {counted(done, 'finished unit')} "
            f"{'gives' if done == 1 else 'give'} no result.")


def member_row(assignment_id: str, member: GangMemberView, phase: str = "running") -> tuple:
    """A gang member in the units table: where it runs, its superstep, and how long it waited for the others;
    `phase`: its gang's (a finished gang's members are done, not stepping)."""
    state = member_state(member.at_barrier, bool(member.host), phase)
    return (
        f"{assignment_id}.{member.rank}",
        styled_state(state),
        member.host_name or "—",
        f"superstep {member.superstep}",
        "—",
        str(member.moves),
        "—",
        Text(member_waited(bool(member.host), format_duration(member.waited_seconds))),
    )


def describe_unit(unit: UnitView) -> Group:
    eta = format_duration(unit.eta_seconds) if unit.eta_seconds is not None else "—"
    lines = [
        Text.assemble(("State  ", "bold"), styled_state(unit.reported or unit.state)),
        Text.assemble(("Runs on  ", "bold"), unit.host_name or "—", f"  {unit.host[:8]}" if unit.host else ""),
        Text.assemble(("Progress  ", "bold"), progress_bar(unit.progress, width=20), f"  ETA {eta}"),
        Text.assemble(("Moves  ", "bold"), str(unit.moves), ("   Failures  ", "bold"), str(unit.failures)),
    ]
    if unit.error:
        lines.append(Text.assemble(("Error  ", "bold red"), unit.error))
    if unit.waiting:
        lines.append(Text.assemble(("Why waiting  ", "bold yellow"), unit.waiting))
    return Group(*lines)


def checkpoint_age(at: float | None, now: float) -> str:
    """How long ago a gang's last global checkpoint was taken ('' if it has none)."""
    return "" if at is None else format_ago(at, now)


def describe_result(assignment: AssignmentView, now: float,
                    looking: tuple[str, FoundUnits | None] | None = None, *, movable: bool = True,
                    files: tuple[str, ...] = ()) -> Group:
    """The selected assignment's details; `movable`: another live node could take a unit (on a lone desk the hint to
    move one would lead to a dialog saying there is none); `files`: the names of its units' output files."""
    params = ", ".join(f"{k}={v!r}" for k, v in sorted(assignment.params.items()))
    lines = [Text.assemble(("Parameters  ", "bold"), params or "none")]
    if assignment.error:
        lines.append(Text.assemble(("Error  ", "bold red"), assignment.error))
    elif assignment.state == "done" and assignment.result_path:
        lines.append(
            Text.assemble(
                ("Result  ", "bold"),
                f"{assignment.result_filename} ({assignment.result_media_type or 'unknown type'})  ",
                ("press w to save it elsewhere", "italic"),
            )
        )
        if files:
            shown = ", ".join(files[:3]) + (", …" if len(files) > 3 else "")
            lines.append(Text.assemble(("Files  ", "bold"), f"{counted(len(files), 'output file')} of its units in "
                                       f"{assignment.files_folder}: {shown}"))
    elif assignment.state == "running" and assignment.gang is None and movable:
        lines.append(Text("Running: press m to move the selected unit to another peer.", style="italic"))
    gang = assignment.gang
    if gang is not None:
        checkpoint = ("none yet" if gang.checkpoint_superstep is None
                      else f"before superstep {gang.checkpoint_superstep} ({gang.checkpoint_bytes} bytes), "
                           f"taken {checkpoint_age(gang.checkpoint_at, now)}")
        where = gang.reason if gang.phase == "finished" else (
            f"{gang.phase} at superstep {gang.superstep}" + (f": {gang.reason}" if gang.reason else ""))
        lines.append(Text.assemble(("Gang  ", "bold"), f"{counted(len(gang.members), 'member')}, {where}"))
        lines.append(Text.assemble(("Last global checkpoint  ", "bold"), checkpoint,
                                   ("   Moves  ", "bold"), str(gang.moves), ("   Restarts  ", "bold"), str(gang.restarts)))
    if round(assignment.wasted_seconds) > 0:
        lines.append(Text.assemble(("Wasted  ", "bold yellow"), describe_waste(assignment)))
    if units_shown(assignment, looking):
        lines.append(Text.assemble(("Units  ", "bold"), units_shown(assignment, looking)))
    return Group(*lines)


def no_result(assignment: AssignmentView | None) -> str:
    """Why w saves nothing: said of the assignment the owner has selected, not as if none were."""
    if assignment is None:
        return "Select a finished assignment on the Assignments tab (4)."
    if assignment.state in ("failed", "cancelled"):
        return f"{assignment.id} {assignment.state}: it has no result."
    if assignment.state == "done":   # (done, and the node keeps no readable copy of its result)
        return f"{assignment.id} is done, but its node keeps no copy of its result to save."
    units = "" if assignment.gang else f", {assignment.units_done} of {assignment.unit_count} units done"
    return (f"{assignment.id} is still {assignment.state} ({assignment.progress:.0%}{units}): its result can be "
            "saved once it is done.")


def units_shown(assignment: AssignmentView, looking: tuple[str, FoundUnits | None] | None = None) -> str:
    """Which of a long sweep's units the table lists (a snapshot carries SNAPSHOT_UNITS of them), or those the owner
    looks for (`looking`: the words, and the node's answer once it came); '' for all."""
    shown, count, waiting = len(assignment.units), assignment.unit_count, assignment.unit_count - assignment.units_done
    if looking is not None:
        words, found = looking
        if found is None:
            return f"looking for “{words}” among {count:,}…"
        if not found.matched:
            return f"none of {count:,} matches “{words}”; escape: the usual ones"
        return f"{len(found.units):,} of {found.matched:,} matching “{words}” (of {count:,}); escape: the usual ones"
    if shown >= count:
        return ""
    if not waiting:
        which = "the last ones done"
    elif waiting >= shown:
        which = "those running, then those waiting, by number"
    else:
        which = f"the {waiting:,} not done, then the last ones done"
    return f"{shown:,} of {count:,} shown: {which}"


def describe_waste(assignment: AssignmentView) -> str:
    """'12 s of guest work thrown away: 10 s redone since checkpoint, 2 s superseded copy'."""
    reasons = ", ".join(f"{format_duration(seconds)} {reason}" for reason, seconds in assignment.waste.items())
    return f"{format_duration(assignment.wasted_seconds)} of guest work thrown away: {reasons}"
