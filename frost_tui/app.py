"""The Textual app: built by `create_app` (tests and screenshots reuse it), run by `run_app`.

The app keeps only the latest node snapshot and redraws the visible tab when a new one
arrives; it sends commands one way with `send_nowait` and learns their outcome from later
snapshots. The node itself runs as a trio guest run on Textual's asyncio loop.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import outcome
import trio
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Input, TabbedContent, TabPane, Tabs

from frost_core import (
    AddPlugin,
    CancelAssignment,
    ClearQuarantine,
    Command,
    Config,
    EvictGuests,
    FinishThenPause,
    FrostError,
    HandOffGuests,
    Link,
    MoveTask,
    NodeApi,
    NodeSnapshot,
    PauseHosting,
    Query,
    ReadResult,
    ResultData,
    ResumeHosting,
    SubmitAssignment,
    counted,
    waiting_for_restart,
)

from frost_tui.tabs.assignments import AssignmentsPane, no_result, what_cancel_loses
from frost_tui.dialogs.small import AtStake, ConfirmDialog, DetailsDialog, MoveDialog, PathDialog, QuitDialog
from frost_tui.tabs.events import EventsPane
from frost_tui.tabs.guests import GuestsPane, work_lost_by_evicting
from frost_tui.dialogs.columns import ColumnsDialog
from frost_tui.dialogs.help import HelpScreen
from frost_tui.tabs.ledger import LedgerPane
from frost_tui.tabs.machine import MachinePane
from frost_tui.tabs.pane import Pane
from frost_tui.tabs.peers import PeersPane
from frost_tui.tabs.plugins import PluginsPane
from frost_tui.tabs.settings import SettingsPane
from frost_tui.dialogs.submit import SubmitDialog
from frost_tui.palette import FrostCommands, PaletteCommand
from frost_tui.hangup import detach_from_terminal, on_hang_up
from frost_tui.trio_host import TrioHost
from frost_tui.ui_choices import CHOICES_FILE, UiChoices
from frost_tui.widgets.footer import KeysFooter
from frost_tui.widgets.live_table import LiveTable
from frost_tui.widgets.topbar import TopBar

TABS: tuple[tuple[str, str, type[Pane]], ...] = (
    ("machine", "1 Machine", MachinePane),
    ("guests", "2 Guests", GuestsPane),
    ("peers", "3 Peers", PeersPane),
    ("assignments", "4 Assignments", AssignmentsPane),
    ("plugins", "5 Plugins", PluginsPane),
    ("events", "6 Events", EventsPane),
    ("settings", "7 Settings", SettingsPane),
    ("ledger", "8 Ledger", LedgerPane),
)
TABLE_NAMES = {"guests-table": "Guests", "peers-table": "Peers", "assignments-table": "Assignments",
               "units-table": "an assignment's units"}
"""What the columns dialog calls each table whose columns the owner may pick."""
STATE_CHANGING_ACTIONS = frozenset({
    "toggle_pause", "evict_all", "evict_selected", "finish", "submit", "load_plugin", "move", "save_settings",
    "cancel_assignment", "remove_plugin", "unquarantine",
})
FOOTER_SHORT = {
    "toggle_pause": "Pause", "finish": "Finish", "evict_selected": "Evict one", "save_result": "Save",
    "unquarantine": "Trust", "remove_plugin": "Remove", "load_plugin": "Load", "next_node": "Next",
}
"""Labels for a footer too narrow for the whole ones (80 columns)."""
FOOTER_RANK = {
    "back_out": 0, "request_quit": 0, "help": 0,
    "finish": 2, "move": 2, "filter": 2, "next_node": 2,
    "choose_columns": 3, "command_palette": 3,
}
"""What a narrow footer leaves out first (highest rank; 0 never): see `KeysFooter`. Unnamed actions rank 1."""
EVICT_BEFORE_QUIT_TIMEOUT = 60.0
# Snapshots the owner did not cause redraw at most this often (htop refreshes every 1.5 s);
# the ones that follow a keypress within COMMAND_WINDOW redraw at once.
PASSIVE_REDRAW_INTERVAL = 1.0
COMMAND_WINDOW = 3.0
log = logging.getLogger("frost.tui")


class SnapshotArrived(Message):
    """A new snapshot is waiting; a burst of these collapses into one redraw."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotArrived)


class KeyedTabs(TabbedContent):
    """Tabs that only the owner's keys and clicks switch.

    TabbedContent shows whichever tab a newly focused widget is in; a focus that was asked for
    just before a quick second tab key (or a hidden widget that lost its focus to a neighbour)
    then pulled the old tab back, so `1` or `7` seemed to do nothing.
    """

    def _on_tab_pane_focused(self, event: TabPane.Focused) -> None:
        event.stop()
        event.prevent_default()  # TabbedContent's own handler would switch to the focused widget's tab


class FrostApp(App[int]):
    """One window over one node: eight tabs, single-key commands, nothing shown that the node did not say."""

    CSS_PATH = "frost.tcss"
    TITLE = "frost-tui"
    ENABLE_COMMAND_PALETTE = True
    COMMANDS = App.COMMANDS | {FrostCommands}
    # The footer shows these in this order, after the tab's own keys: quit and help first, so a newcomer always
    # finds them, then the owner's keys by how much they matter. Keys that act on one tab's rows (x, m, /, l)
    # are shown by those tabs; elsewhere they say where they act.
    BINDINGS = [
        Binding("escape", "back_out", "Back"),  # shown (first) only while there is something to back out of
        Binding("q", "request_quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("p", "toggle_pause", "Pause/resume"),
        Binding("e", "evict_all", "Evict all"),
        Binding("s", "submit", "Submit"),
        Binding("f", "finish", "Finish+pause"),
        Binding("x", "evict_selected", "Evict guest", show=False),
        Binding("m", "move", "Move", show=False),
        Binding("slash", "filter", "Filter", show=False),
        Binding("l", "load_plugin", "Load plugin", show=False),
        Binding("h", "next_node", "Next node"),
        Binding("c", "cancel_assignment", "Cancel", show=False),
        Binding("enter", "details", "Details", show=False),
        Binding("w", "save_result", "Save result", show=False),
        Binding("o", "sort_peers", "Sort", show=False),
        Binding("v", "choose_columns", "Columns", show=False),
        Binding("u", "unquarantine", "Trust again", show=False),
        Binding("ctrl+s", "save_settings", "Save settings", show=False),
        Binding("ctrl+q", "quit", "Quit now", show=False, priority=True),
        Binding("ctrl+c", "quit", "Quit now", show=False, priority=True),
        *(Binding(str(n), f"show_tab('{tab_id}')", label, show=False) for n, (tab_id, label, _) in enumerate(TABS, 1)),
    ]

    def __init__(self, node: NodeApi, *, clock: Callable[[], float] = time.time,
                 choices_file: Path | None = None) -> None:
        super().__init__()
        self.node = node
        self.clock = clock
        self.choices_file = choices_file   # where the owner's choices (the Peers sort) are kept; None: nowhere
        self.choices = UiChoices.load(choices_file)
        self.host = TrioHost()
        self.snapshot: NodeSnapshot | None = None
        self._latest: NodeSnapshot | None = None
        self._redraw_pending = False
        self._stopping = False
        self._quit_when_no_guests = False
        self._hung_up = False
        self._notified_until = clock()
        self._last_redraw_at = -PASSIVE_REDRAW_INTERVAL
        self._last_command_at = -COMMAND_WINDOW
        self._redraw_timer: Timer | None = None
        self._select_new_after: frozenset[str] | None = None  # assignment ids known when the owner submitted

    # ----------------------------------------------------------------- layout and lifecycle

    def compose(self) -> ComposeResult:
        yield TopBar(id="topbar")
        with KeyedTabs(initial="machine", id="tabs"):
            for tab_id, label, pane_class in TABS:
                with TabPane(label, id=tab_id):
                    yield pane_class(id=f"{tab_id}-pane")
        yield KeysFooter(short=FOOTER_SHORT, rank=FOOTER_RANK)

    def on_mount(self) -> None:
        self.query_one(PeersPane).sort_as(self.choices.peers_sort, self.choices.peers_descending)
        self.query_one(GuestsPane).as_tree = self.choices.guests_tree
        for table in self.query(LiveTable):
            table.hide(frozenset(self.choices.hidden_columns.get(table.id or "", ())))
        if self.choices.theme in self.available_themes:   # (one of another Textual version's: the default)
            self.theme = self.choices.theme
        self.theme_changed_signal.subscribe(self, lambda theme: self._keep_choices(theme=theme.name))
        self.node.set_snapshot_listener(self.receive_snapshot)
        self.host.start(self.node.serve, on_done=self._node_stopped)
        self.receive_snapshot(self.node.snapshot())
        if self.node.link().kind == "embedded" and not on_hang_up(self._terminal_gone):
            log.warning("closing this terminal stops the node at once: its signals cannot be watched here")

    def _terminal_gone(self) -> None:
        """The terminal closed or the session ends (`frost_tui.hangup`): hand the guests to peers within
        `node.stop_handoff` seconds, as the service does on a stop, then stop the node (it leaves the cluster on its
        way out) and end the process (`_node_stopped`): there is no terminal left to give back, and Textual's own
        exit, writing to it, could hang."""
        if self._hung_up:
            return
        self._hung_up = True
        detach_from_terminal()
        log.info("the terminal went away: handing the guests to peers, then stopping")
        deadline = float(self.node.snapshot().settings.get("node.stop_handoff", 0.0))

        async def hand_off_then_stop() -> None:
            with trio.move_on_after(deadline):
                try:
                    log.info("handed %s to peers", counted(await self.node.execute(HandOffGuests()), "guest"))
                except FrostError as error:
                    log.warning("the guests could not be handed on: %s", error.message)
            self.host.cancel()

        if not self.host.run_soon(hand_off_then_stop):
            self._end_process()

    def _end_process(self) -> None:
        log.info("stopped: the terminal went away")
        logging.shutdown()
        os._exit(0)

    async def on_unmount(self) -> None:
        self._stopping = True
        self.node.set_snapshot_listener(None)
        await self.host.stop()

    def receive_snapshot(self, snapshot: NodeSnapshot) -> None:
        """The node's listener: keep only the newest snapshot and ask for at most one redraw."""
        self._latest = snapshot
        if not self._redraw_pending:
            self._redraw_pending = True
            self.post_message(SnapshotArrived())

    def on_snapshot_arrived(self, message: SnapshotArrived) -> None:
        """Redraw now after the owner's command, else at most once per PASSIVE_REDRAW_INTERVAL."""
        self._redraw_pending = False
        now = time.monotonic()
        if now - self._last_command_at < COMMAND_WINDOW or now - self._last_redraw_at >= PASSIVE_REDRAW_INTERVAL:
            self._take_latest()
        elif self._redraw_timer is None:
            delay = PASSIVE_REDRAW_INTERVAL - (now - self._last_redraw_at)
            self._redraw_timer = self.set_timer(delay, self._take_latest)

    def _take_latest(self) -> None:
        if self._redraw_timer is not None:
            self._redraw_timer.stop()
            self._redraw_timer = None
        if self._latest is None or self._latest is self.snapshot:
            return
        self._last_redraw_at = time.monotonic()
        self.snapshot = self._latest
        self._select_submitted()
        self._redraw()
        self._notify_errors(self.snapshot)
        if self._quit_when_no_guests and not self.snapshot.guests:
            self.exit(0)

    def on_key(self, event: events.Key) -> None:
        """A printable key that reaches the app while a text field has the keyboard was typed for that field
        (it takes every printable key it is given) but went to the widget that had the keyboard when it came:
        a terminal hands over a burst at once ("/" and the words, or a paste), and the field that "/" opened,
        a tab's filter or a dialog's, had the keyboard only once "/" was handled. It is typed in, not lost."""
        field = self.focused
        if isinstance(field, Input) and event.is_printable and event.character is not None:
            field.insert_text_at_cursor(event.character)
            event.stop()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """Redraw and focus the tab now shown; not a tab a later key replaced, nor any once the tabs are gone
        (the app closing: a tab chosen just before the quit, by a submit's answer say, is handled after)."""
        tabs = event.tabbed_content
        if tabs.is_attached and event.pane.id == tabs.active:
            self._redraw()
            self._focus_tab()

    def _focus_tab(self) -> None:
        """The keyboard goes to the tab's main table (or the tab bar), at once: a focus asked for
        later could land after the next tab key, on a widget that tab hides.

        The focus is set on the tabs' own screen, not the one on top: a tab change that arrives after
        ? opened the help would otherwise give the help screen a focus outside itself, and its keys
        (q, escape) would reach the app's bindings instead of closing the help."""
        tabs = self.query_one(TabbedContent)
        target = self.active_pane().main_widget() or tabs.query_one(Tabs)
        target.screen.set_focus(target)

    def _redraw(self) -> None:
        snapshot = self.snapshot
        if snapshot is None:
            return
        now = self.clock()
        try:
            topbar = self.query_one(TopBar)
            pane = self.active_pane()
        except NoMatches:
            return  # on the way out: the screen's widgets are already gone
        topbar.show(snapshot, self.node.link())
        try:
            pane.show(snapshot, now)
        except NoMatches:
            # The first snapshot can arrive while the pane is still mounting its widgets:
            # draw it once they are there.
            self.call_after_refresh(self._redraw)

    def _notify_errors(self, snapshot: NodeSnapshot) -> None:
        """Errors reach the owner as a titled notification, each once, never as a traceback."""
        newest = self._notified_until
        for event in snapshot.events:
            if event.at > self._notified_until and event.severity == "error":
                self.notify(event.message, title=event.title or "Error", severity="error", timeout=8)
            newest = max(newest, event.at)
        self._notified_until = newest

    def _node_stopped(self, result: outcome.Outcome) -> None:
        """The trio run ended: expected when we cancelled it, otherwise the app exits with code 1."""
        if self._hung_up:
            self._end_process()
        if self._stopping:
            return
        if isinstance(result, outcome.Error):
            log.error("the node stopped", exc_info=result.error)  # the traceback goes to the log, not the screen
            text = describe_crash(result.error)
        else:
            text = "The node stopped unexpectedly."
        self.exit(1, return_code=1, message=text)

    # ----------------------------------------------------------------- helpers

    def active_pane(self) -> Pane:
        tab = self.query_one(TabbedContent).active or "machine"
        return self.query_one(f"#{tab}-pane", Pane)

    def ask_soon(self, query: Query, reply: Callable[[Any], None]) -> bool:
        """Ask the node `query` without waiting: `reply` gets its answer, or the FrostError that says why there is
        none, on the screen's side. False if the node is not running to be asked."""

        async def ask() -> None:
            try:
                answer = await self.node.ask(query)
            except FrostError as error:
                answer = error
            self.call_next(reply, answer)

        return self.host.run_soon(ask)

    def send(self, command: Command) -> None:
        """One way: the outcome shows up in a later snapshot (or as an error event).

        While an attached UI reconnects the command is dropped here, and the owner told so: the
        node must not act later on a keypress made against a screen that was out of date. A
        watching UI sends nothing either (the Settings tab's save, say); the node would refuse it.
        """
        link = self.node.link()
        if not link.connected or link.watch:
            reason = "this UI only watches" if link.watch else f"not connected to the node ({link.describe()})"
            self.notify(f"{reason[0].upper()}{reason[1:]}; nothing was sent.", title="Command dropped",
                        severity="warning")
            return
        self._last_command_at = time.monotonic()
        self.node.send_nowait(command)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A watching UI shows no key that changes the node; only an attached one switches nodes."""
        link = self.node.link()
        if action in STATE_CHANGING_ACTIONS and link.watch:
            return False
        if action == "next_node":
            return link.switchable
        if action == "back_out":  # Esc is offered while there is a field to leave or a filter to clear
            return isinstance(self.focused, Input) or self._filter_applied()
        return True

    def _filter_applied(self) -> bool:
        try:
            return self.active_pane().filter_applied()
        except NoMatches:  # not composed yet
            return False

    def palette_commands(self) -> list[PaletteCommand]:
        """The palette's frost commands (`FrostCommands` ranks the tabs first); evicting asks first there."""
        commands = [
            PaletteCommand(f"Show {label[2:]} ({n})", f"Switch to tab {n}", lambda t=tab_id: self.action_show_tab(t),
                           navigation=True)
            for n, (tab_id, label, _) in enumerate(TABS, 1)
        ]
        return commands + [
            PaletteCommand("Help (?)", "Every key and what the states mean", self.action_help, navigation=True),
            PaletteCommand("Pause or resume hosting (p)", "Stop every guest at once, or resume", self.action_toggle_pause),
            PaletteCommand("Evict all guests (e)", "Checkpoint every guest and send it away (asks first)",
                           lambda: self._confirm("Evict all guests?", self._describe_evict_all(), "Evict all",
                                                 self.action_evict_all)),
            PaletteCommand("Evict selected guest (x)", "Send the guest under the cursor on Guests away (asks first)",
                           lambda: self._evict_guest(ask=True)),
            PaletteCommand("Finish then pause (f)", "Take nothing new; pause when guests are done", self.action_finish),
            PaletteCommand("Submit an assignment (s)", "Run a plugin across the cluster", self.action_submit),
            PaletteCommand("Load a plugin (l)", "Add a plugin file", self.action_load_plugin),
            PaletteCommand("Move unit to a peer (m)", "Migrate the selected unit", self.action_move),
            PaletteCommand("Cancel assignment (c)", "Stop the assignment selected on Assignments (asks first)",
                           self.action_cancel_assignment),
            PaletteCommand("Save result (w)", "Copy the selected assignment's result", self.action_save_result),
        ]

    def _confirm(self, title: str, text: str, yes: str, then: Callable[[], None]) -> None:
        """Ask before something that cannot be taken back; `then` runs only on yes."""
        self.push_screen(ConfirmDialog(title, text, yes), lambda answer: then() if answer else None)

    def _describe_evict_all(self) -> str:
        guests = self.snapshot.guests if self.snapshot else ()
        risks = [risk for risk in map(work_lost_by_evicting, guests) if risk]
        return " ".join([f"{counted(len(guests), 'guest')} checkpoint and leave this machine now.", *risks])

    # ----------------------------------------------------------------- actions (one per key)

    def action_toggle_pause(self) -> None:
        if self.snapshot is not None and self.snapshot.hosting.state == "paused":
            self.send(ResumeHosting())
        else:
            self.send(PauseHosting())

    def action_evict_all(self) -> None:
        self.send(EvictGuests())

    def action_evict_selected(self) -> None:
        """x acts on the guest the owner can see: on the Guests tab only, asking when work would be lost."""
        if self.query_one(TabbedContent).active != "guests":
            self.notify("x evicts the guest selected on the Guests tab: press 2 to see them.", title="Evict a guest")
            return
        self._evict_guest(ask=False)

    def _evict_guest(self, *, ask: bool) -> None:
        guest = self.query_one(GuestsPane).selected_guest()
        if guest is None:
            self.notify("Select a guest on the Guests tab (2) first.", title="No guest selected", severity="warning")
            return
        risk = work_lost_by_evicting(guest)
        evict = lambda: self.send(EvictGuests(task_id=guest.task_id))  # noqa: E731
        if risk or ask:
            self._confirm(f"Evict {guest.task_id}?", risk or f"{guest.task_id} checkpoints and leaves this machine.",
                          "Evict", evict)
        else:
            evict()

    def action_finish(self) -> None:
        self.send(FinishThenPause())

    def action_submit(self) -> None:
        plugins = list(self.snapshot.plugins) if self.snapshot else []
        assignments = self.snapshot.assignments if self.snapshot else ()
        last = max(assignments, key=lambda a: a.created_at).plugin if assignments else None
        link = self.node.link()
        self.push_screen(SubmitDialog(plugins, first=last, files_on=link.where if link.remote else None),
                         self._send_if_chosen)

    def _send_if_chosen(self, command: SubmitAssignment | None) -> None:
        if command is not None:
            self._select_new_after = frozenset(a.id for a in self.snapshot.assignments) if self.snapshot else frozenset()
            self.send(command)
            # After the dialog has gone: closing it gives the focus back to the old tab's table,
            # which would pull that tab back into view.
            self.call_after_refresh(self.action_show_tab, "assignments")

    def _select_submitted(self) -> None:
        """The first snapshot that shows the owner's new assignment puts the cursor on it."""
        if self._select_new_after is None or self.snapshot is None:
            return
        new = [a for a in self.snapshot.assignments if a.id not in self._select_new_after]
        if new:
            self._select_new_after = None
            self.query_one(AssignmentsPane).select_assignment(max(new, key=lambda a: a.created_at).id)

    def action_load_plugin(self) -> None:
        def load(path: Path | None) -> None:
            if path is not None:
                self.send(AddPlugin(path=str(path)))
                self.action_show_tab("plugins")

        link = self.node.link()
        where = f" on the machine of {link.where} (the node reads it there)" if link.remote else ""
        self.push_screen(PathDialog("Load a plugin", f"Path of a plugin file (.py) or folder (with __init__.py){where}:",
                                    folders=True, elsewhere=link.remote), load)

    def action_move(self) -> None:
        snapshot = self.snapshot
        task_id, host = self._selected_task()
        if snapshot is None or task_id is None:
            self.notify("Select a running unit (Assignments, 4) or a guest (Guests, 2) first.",
                        title="Nothing to move", severity="warning")
            return
        # Any live node but the one it runs on: this machine too, for a unit of mine running elsewhere.
        peers = [p for p in snapshot.peers if p.state == "alive" and p.node_id != host]
        names = {p.node_id: p.name for p in peers}

        def move(node_id: str | None) -> None:
            if node_id is not None:
                self.send(MoveTask(task_id=task_id, node=node_id))
                self.notify(f"Moving {task_id} to {names.get(node_id, node_id[:8])}…", title="Move")

        self.push_screen(MoveDialog(task_id, peers), move)

    def _selected_task(self) -> tuple[str | None, str | None]:
        """The task the owner means and where it runs: the guest on Guests, else the unit on Assignments."""
        if self.query_one(TabbedContent).active == "guests":
            guest = self.query_one(GuestsPane).selected_guest()
            return (guest.task_id, self.snapshot.node_id if self.snapshot else None) if guest else (None, None)
        unit = self.query_one(AssignmentsPane).selected_unit()
        if unit is None or unit.state != "running":  # only a running unit has a host to leave
            return None, None
        return unit.task_id, unit.host

    def action_cancel_assignment(self) -> None:
        """c on Assignments: stop the selected running assignment, after a question."""
        if self.query_one(TabbedContent).active != "assignments":
            self.notify("c cancels the assignment selected on the Assignments tab: press 4 to see them.",
                        title="Cancel an assignment")
            return
        assignment = self.query_one(AssignmentsPane).selected_assignment()
        if assignment is None or assignment.state != "running":
            self.notify("Select a running assignment first.", title="Nothing to cancel", severity="warning")
            return
        self._confirm(f"Cancel {assignment.id}?", what_cancel_loses(assignment), "Cancel assignment",
                      lambda: self.send(CancelAssignment(assignment_id=assignment.id)))

    def action_details(self) -> None:
        details = self.active_pane().details()
        if details is not None:
            self.push_screen(DetailsDialog(*details))

    def action_save_result(self) -> None:
        assignment = self.query_one(AssignmentsPane).selected_assignment()
        if assignment is None or assignment.state != "done" or not assignment.result_path:
            self.notify(no_result(assignment), title="No result", severity="warning")
            return
        source = Path(assignment.result_path)

        def save(target: Path | None) -> None:
            if target is None:
                return
            if not self.node.link().remote:
                self.run_worker(lambda: self._write_result(target, lambda: shutil.copyfile(source, target)),
                                thread=True, group="save")
                return
            # The node's copy is on its own machine: its bytes come over the link, to be written here.
            self.ask_soon(ReadResult(assignment_id=assignment.id), lambda answer: self._save_sent(answer, target))

        self.push_screen(
            PathDialog("Save the result", f"Copy {source.name} to:", value=str(Path.cwd() / (assignment.result_filename or source.name)), must_exist=False),
            save,
        )

    def _save_sent(self, answer: ResultData | FrostError, target: Path) -> None:
        if isinstance(answer, FrostError):
            self.notify(answer.message, title="Result not saved", severity="error")
            return
        self.run_worker(lambda: self._write_result(target, lambda: target.write_bytes(answer.data)), thread=True,
                        group="save")

    def _write_result(self, target: Path, write: Callable[[], object]) -> None:
        try:
            write()
        except OSError as error:
            self.call_from_thread(self.notify, f"{target}: {error.strerror or error}", title="Result not saved",
                                  severity="error")
            return
        self.call_from_thread(self.notify, f"Saved to {target}", title="Result saved")

    def action_show_tab(self, tab_id: str) -> None:
        self.query_one(TabbedContent).active = tab_id
        self._focus_tab()

    def action_back_out(self) -> None:
        """Esc outside a dialog: leave the field, clear the tab's filter, keys back to the tab."""
        self.active_pane().back_out()
        self._focus_tab()

    def action_filter(self) -> None:
        if self.query_one(TabbedContent).active == "assignments":
            self.query_one(AssignmentsPane).find_units()
            return
        box = self.active_pane().filter_box()
        if box is None:
            self.notify("Filtering works on Peers (3), Assignments (4: their units) and Events (6).",
                        title="No filter here")
        else:
            box.screen.set_focus(box)  # at once: the letters typed right after / belong in it

    def action_sort_peers(self) -> None:
        if self.query_one(TabbedContent).active != "peers":
            self.notify("o sorts the Peers table: press 3 to see it.", title="Sort")
            return
        self.query_one(PeersPane).sort_by_next()

    def action_choose_columns(self) -> None:
        """The columns of the table the keyboard is in (or the tab's first that has a choice), in a dialog."""
        pane = self.query_one(f"#{self.query_one(TabbedContent).active}-pane")
        tables = [table for table in pane.query(LiveTable) if table.hideable]
        if not tables:
            self.notify("v picks the columns of the Guests, Peers and Assignments tables.", title="Columns")
            return
        table = self.focused if self.focused in tables else tables[0]
        assert isinstance(table, LiveTable)

        def chosen(hidden: frozenset[str] | None) -> None:
            if hidden is None or hidden == table.hidden:
                return
            table.hide(hidden)
            self._keep_choices(hidden_columns={**self.choices.hidden_columns, table.id or "": sorted(hidden)})

        self.push_screen(ColumnsDialog(TABLE_NAMES.get(table.id or "", "this table"), table.hideable, table.hidden),
                         chosen)

    def on_peers_pane_sorted(self, message: PeersPane.Sorted) -> None:
        self._keep_choices(peers_sort=message.column, peers_descending=message.descending)

    def on_guests_pane_tree_toggled(self, message: GuestsPane.TreeToggled) -> None:
        self._keep_choices(guests_tree=message.tree)

    def _keep_choices(self, **changed: Any) -> None:
        self.choices = dataclasses.replace(self.choices, **changed)
        self.choices.save(self.choices_file)

    def action_unquarantine(self) -> None:
        """u on the Peers tab: the selected peer, quarantined for a wrong result, gets units again."""
        peer = self.query_one(PeersPane).selected_peer() if self.query_one(TabbedContent).active == "peers" else None
        if peer is None or not peer.quarantined:
            self.notify("u trusts a quarantined peer again: select one on the Peers tab (3) first.",
                        title="Not quarantined")
            return
        self.send(ClearQuarantine(node=peer.node_id))

    def action_save_settings(self) -> None:
        self.query_one(SettingsPane).request_save()

    def on_settings_pane_save(self, message: SettingsPane.Save) -> None:
        self.send(message.command)
        values = message.command.values
        saved = ", ".join(f"{k} = {v}" for k, v in values.items())
        if later := waiting_for_restart(values):   # the owner must not wait for a change that waits for a restart
            self.notify(f"{saved}\nWaits for a restart: {later}.", title="Saving settings", severity="warning",
                        timeout=10)
        else:
            self.notify(saved, title="Saving settings")

    def on_settings_pane_join(self, message: SettingsPane.Join) -> None:
        def join() -> None:
            self.send(message.command)
            self.notify(f"Joining cluster {message.fingerprint}: its peers appear on the Peers tab (3) as they answer.",
                        title="Joining")

        self._confirm(f"Join cluster {message.fingerprint}?",
                      "This node tells the peers of its cluster that it leaves, and takes guests and places units in "
                      "the other one from now on; it keeps that cluster's key for its next start. It stays where it is "
                      "while guests of other peers run here or units of your assignments run on peers.",
                      "Join", join)

    def action_help(self) -> None:
        tab = self.query_one(TabbedContent).active
        self.push_screen(HelpScreen(tab, {tab_id: f"{label[2:]} ({label[0]})" for tab_id, label, _ in TABS}))

    def action_next_node(self) -> None:
        self.node.next_target()

    def action_request_quit(self) -> None:
        """Detach from a node that runs on its own; an embedded one stops, so say what that does to its
        guests and to the assignments it is master of, and ask."""
        stake = AtStake.of(self.snapshot) if self.snapshot else AtStake()
        if (not stake.guests and not stake.assignments) or self.node.link().kind != "embedded":
            self.exit(0)
            return

        def decide(choice: str | None) -> None:
            if choice == "keep":
                self.exit(0)
            elif choice == "evict":
                self._quit_when_no_guests = True
                self.send(EvictGuests())
                self.notify("Evicting guests; frost-tui quits when they are gone.", title="Quitting")
                self.set_timer(EVICT_BEFORE_QUIT_TIMEOUT, lambda: self.exit(0))

        self.push_screen(QuitDialog(stake), decide)

    async def action_quit(self) -> None:
        self.exit(0)


def describe_crash(error: BaseException) -> str:
    """One line for the owner: the first of our own errors inside any exception group, else the first cause."""
    leaves = list(_leaf_errors(error))
    chosen = next((e for e in leaves if isinstance(e, FrostError)), leaves[0])
    if isinstance(chosen, FrostError):
        return f"The node stopped. {chosen.title}: {chosen.message}"
    return f"The node stopped: {type(chosen).__name__}: {chosen}"


def _leaf_errors(error: BaseException) -> Iterable[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaf_errors(inner)
    else:
        yield error


def create_app(node: NodeApi, *, clock: Callable[[], float] = time.time,
               choices_file: Path | None = None) -> FrostApp:
    """Build the app around a node (the real one, or a fake in tests and screenshots); `choices_file`: where
    the owner's choices in it are kept between runs (None: they last as long as the app)."""
    return FrostApp(node, clock=clock, choices_file=choices_file)


def run_app(config: Config, *, targets: list | None = None, watch: bool = False) -> int:
    """Run the terminal UI until the owner quits; the exit code for the shell.

    With `targets` the UI attaches to a node running elsewhere (`AttachedNode`); without, it runs
    one embedded in this process.
    """
    from frost_core import AttachedNode, Node, configure_logging

    if not logging.getLogger("frost").handlers:  # a log file, never the screen: stderr would tear the UI
        # An attached UI keeps a log of its own: the node it attaches to rotates frost-tui.log.
        configure_logging(config.paths.log_dir, config.get("log.level"),
                          filename="frost-tui.log" if targets is None else "frost-tui-attached.log")
    if targets is not None:
        node = AttachedNode(targets, watch=watch)
    else:
        try:
            node = Node(config)
        except FrostError as error:
            print(f"{error.title}: {error.message}", file=sys.stderr)
            return 1
    app = create_app(node, choices_file=config.paths.data_dir / CHOICES_FILE)
    app.run()
    return app.return_code or 0
