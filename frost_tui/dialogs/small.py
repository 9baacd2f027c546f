"""Small modal dialogs with typed results: confirm, details, quit, load plugin, move a unit, save a result."""

from __future__ import annotations

from pathlib import Path

from rich.console import RenderableType
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from frost_core import PeerView


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


class QuitDialog(ModalScreen[str | None]):
    """Quitting stops hosting: ask whether guests go elsewhere first or wait here checkpointed."""

    BINDINGS = [Binding("escape", "dismiss_none", "Cancel"), Binding("e", "choose('evict')", "Evict first"),
                Binding("k", "choose('keep')", "Keep checkpointed")]

    def __init__(self, guests: int) -> None:
        super().__init__()
        self.guests = guests

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Quit frost-tui?", classes="dialog-title")
            yield Label(
                f"{self.guests} guest(s) run here. Evict them to other peers first, or leave them "
                "checkpointed here to resume when frost-tui starts again?",
                classes="dialog-text",
            )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Evict first (e)", id="evict", variant="warning")
                yield Button("Keep checkpointed (k)", id="keep", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None if event.button.id == "cancel" else event.button.id)

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class PathDialog(ModalScreen[Path | None]):
    """Ask for a file path; the caller decides what the path is for."""

    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, title: str, hint: str, *, value: str = "", must_exist: bool = True) -> None:
        super().__init__()
        self.title_text = title
        self.hint = hint
        self.value = value
        self.must_exist = must_exist

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Label(self.hint)
            yield Input(self.value, placeholder="/path/to/file", id="path-input")
            yield Label("", id="path-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        error = self.query_one("#path-error", Label)
        if not text:
            error.update("Type a path, or press escape to cancel.")
            return
        path = Path(text).expanduser()
        if self.must_exist and not path.is_file():
            error.update(f"Not a file: {path}")
            return
        if not self.must_exist and not path.parent.is_dir():
            error.update(f"Not a directory: {path.parent}")
            return
        self.dismiss(path)

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
                           f"available {p.available:.2f}  {p.guests} guest(s)", id=p.node_id)
                    for p in self.peers
                ),
                id="move-peers",
            )

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
