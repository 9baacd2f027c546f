"""Small modal dialogs with typed results: confirm, details, quit, load plugin, move a unit, save a result."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import RenderableType
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from frost_core import NodeSnapshot, PeerView, counted

from frost_tui.widgets.format import format_duration


class ConfirmDialog(ModalScreen[bool]):
    """Ask before something that cannot be taken back; y or the button goes ahead, escape or n does not."""

    BINDINGS = [Binding("escape,n", "answer(False)", "Cancel"), Binding("y", "answer(True)", "Yes")]

    def __init__(self, title: str, text: str, yes: str) -> None:
        super().__init__()
        self.title_text = title
        self.text = text
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Label(self.text, classes="dialog-text")
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.yes} (y)", id="yes", variant="error")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()  # Enter on a dialog that appeared by surprise does nothing harmful

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class DetailsDialog(ModalScreen[None]):
    """Everything known about one row, in full (k9s's describe); escape or enter closes it."""

    BINDINGS = [Binding("escape,enter,q", "dismiss", "Close")]

    def __init__(self, title: str, body: RenderableType) -> None:
        super().__init__()
        self.title_text = title
        self.body = body

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Static(self.body, classes="dialog-text")
            yield Label("Press escape to close.", classes="setting-doc")


@dataclass(frozen=True)
class AtStake:
    """What quitting an embedded node stops: the guests here, by whose they are, and the work it is master of."""

    foreign: int = 0                 # guests of other machines' assignments
    foreign_at_risk: float = 0.0     # their CPU-seconds since their last checkpoints
    own: int = 0                     # units of this machine's own assignments running here
    own_at_risk: float = 0.0
    assignments: int = 0             # running assignments this machine is master of
    peers: int = 0                   # peers alive: where an evicted guest can go

    @classmethod
    def of(cls, snapshot: NodeSnapshot) -> AtStake:
        running = {a.id for a in snapshot.assignments if a.state == "running"}
        own = [g for g in snapshot.guests if g.assignment_id in running]
        foreign = [g for g in snapshot.guests if g.assignment_id not in running]
        return cls(foreign=len(foreign), foreign_at_risk=sum(g.cpu_since_checkpoint_seconds for g in foreign),
                   own=len(own), own_at_risk=sum(g.cpu_since_checkpoint_seconds for g in own),
                   assignments=len(running), peers=sum(p.state == "alive" and not p.is_self for p in snapshot.peers))

    @property
    def guests(self) -> int:
        return self.foreign + self.own

    def lines(self) -> list[str]:
        """What each kind of work does if the node stops now, and what evicting first changes."""
        lines = []
        if self.foreign:
            lines.append(f"{counted(self.foreign, 'guest')} of other machines run here. Quit now and their masters "
                         f"restart them elsewhere from their last checkpoints ({format_duration(self.foreign_at_risk)} "
                         "of CPU work since then is lost); evict first and each checkpoints and moves to another peer.")
        if self.own:
            where = ", and moves to a peer that takes it" if self.peers else ""
            lines.append(f"{counted(self.own, 'unit')} of your own assignments run here. Quit now and they go on from "
                         f"their last checkpoints when frost-tui starts again ({format_duration(self.own_at_risk)} of "
                         f"CPU work since then is lost); evict first and each checkpoints now{where}.")
        if self.assignments:
            its = "its" if self.assignments == 1 else "their"
            lines.append(f"This machine is the master of {counted(self.assignments, 'running assignment')}: "
                         + (f"{its} units on other machines keep running, but the results wait for frost-tui to "
                            "start again here." if self.peers else
                            f"with no peer in reach, nothing works on {'it' if self.assignments == 1 else 'them'} "
                            "until frost-tui starts again here."))
        return lines


class QuitDialog(ModalScreen[str | None]):
    """Quitting stops this node: say what happens to the guests here and to the work it is master of.

    What quitting now really does (core: the node leaves the cluster): each guest's master restarts
    it elsewhere from its last checkpoint, so the work since then is lost; evicting first
    checkpoints and hands each one on. A unit of this node's own is queued again when it starts next;
    units of its running assignments keep running on their hosts, and their results wait for it.
    """

    BINDINGS = [Binding("escape", "dismiss_none", "Cancel"), Binding("e", "choose('evict')", "Evict first"),
                Binding("k", "choose('keep')", "Quit now")]

    def __init__(self, stake: AtStake) -> None:
        super().__init__()
        self.stake = stake

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Quit frost-tui?", classes="dialog-title")
            yield Label("\n\n".join(self.stake.lines()), classes="dialog-text")
            with Horizontal(classes="dialog-buttons"):
                if self.stake.guests:
                    yield Button("Evict first (e)", id="evict", variant="warning")
                yield Button("Quit now (k)", id="keep", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None if event.button.id == "cancel" else event.button.id)

    def action_choose(self, choice: str) -> None:
        if choice == "evict" and not self.stake.guests:
            return
        self.dismiss(choice)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class PathDialog(ModalScreen[Path | None]):
    """Ask for a file path; the caller decides what the path is for."""

    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, title: str, hint: str, *, value: str = "", must_exist: bool = True,
                 folders: bool = False, elsewhere: bool = False) -> None:
        super().__init__()
        self.title_text = title
        self.hint = hint
        self.value = value
        self.must_exist = must_exist
        self.folders = folders  # an existing folder will do as well as a file
        self.elsewhere = elsewhere
        """A path on another machine (the node's, the UI attached over the network): nothing here can check it
        but its form, which must be absolute (this UI's folder means nothing there)."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Static(self.hint)   # (a Static, unlike a Label, wraps a long hint instead of cutting it)
            yield Input(self.value, placeholder="/path/to/file", id="path-input")
            yield Label("", id="path-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        error = self.query_one("#path-error", Label)
        if not text:
            error.update("Type a path, or press escape to cancel.")
            return
        path = Path(text).expanduser()
        if self.elsewhere:
            if not Path(text).is_absolute():
                error.update(f"Give the whole path, from / on: {text} would be looked for in no folder there.")
                return
            self.dismiss(Path(text))
            return
        if self.must_exist and not (path.is_file() or (self.folders and path.is_dir())):
            error.update(f"No such file or folder: {path}" if self.folders else f"Not a file: {path}")
            return
        if not self.must_exist and not path.parent.is_dir():
            error.update(f"Not a directory: {path.parent}")
            return
        self.dismiss(path)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class FindDialog(ModalScreen[str | None]):
    """Ask which of an assignment's units to list; empty text lists the usual ones again."""

    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, assignment_id: str, value: str = "") -> None:
        super().__init__()
        self.assignment_id = assignment_id
        self.value = value

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Find units of {self.assignment_id}", classes="dialog-title")
            yield Label("A unit's number, a state (running, queued, paused, failed), a host's name or words of an "
                        "error; every word must match. Empty: the units running and waiting again.",
                        classes="dialog-text")
            yield Input(self.value, placeholder="1234, failed, curie …", id="find-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class MoveDialog(ModalScreen[str | None]):
    """Pick the node a unit should move to; only live nodes other than the unit's host are offered."""

    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, task_id: str, peers: list[PeerView]) -> None:
        super().__init__()
        self.task_id = task_id
        self.peers = peers

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Move {self.task_id} to…", classes="dialog-title")
            if not self.peers:
                yield Label("No other live peer can take it right now.")
            yield OptionList(
                *(
                    Option(f"{p.name}{' (this machine)' if p.is_self else ''}  {p.address}  "
                           f"available {p.available:.2f}  {counted(p.guests, 'guest')}", id=p.node_id)
                    for p in self.peers
                ),
                id="move-peers",
            )

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
