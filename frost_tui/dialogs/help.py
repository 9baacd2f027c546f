"""The `?` help screen: every key, what it does, and what the state words mean."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

KEYS: tuple[tuple[str, str], ...] = (
    ("p", "pause hosting at once / resume"),
    ("e", "evict every guest now: checkpoint and send each one away (no confirmation)"),
    ("x", "evict the selected guest (Guests tab only); asks when work since its checkpoint would be lost"),
    ("f", "finish the current guests, then pause"),
    ("s", "submit an assignment"),
    ("l", "load a plugin from a file"),
    ("m", "move the selected unit (Assignments) or guest (Guests) to a peer you choose"),
    ("w", "save the selected assignment's result to a file"),
    ("1 … 7", "This machine, Guests, Peers, Assignments, Plugins, Events, Settings (in a text field a digit is "
              "text: press escape first)"),
    ("/", "filter the table (Peers, Events)"),
    ("escape", "leave a field; clear and leave the filter; close a dialog"),
    ("o", "sort the peers by the next column (or click a column header)"),
    ("ctrl+s", "save settings (Settings tab)"),
    ("ctrl+p", "command palette"),
    ("q", "quit, asking whether to evict guests first or keep them checkpointed"),
    ("ctrl+q / ctrl+c", "quit now, keeping guests checkpointed"),
    ("?", "this help"),
)

STATES: tuple[tuple[str, str], ...] = (
    ("hosting", "guests run here at the lowest priority"),
    ("idle", "nothing to run; this machine offers its CPU"),
    ("paused", "you paused hosting; guests are stopped and nothing is offered"),
    ("owner active", "you are using the machine: guests are suspended, then evicted"),
    ("evicting", "guests are being checkpointed and sent to other peers"),
    ("finishing", "current guests finish, nothing new is taken, then pause"),
)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        keys = Table("Key", "Action", box=None, padding=(0, 2), header_style="bold")
        for key, action in KEYS:
            keys.add_row(key, action)
        states = Table("State", "Meaning", box=None, padding=(0, 2), header_style="bold")
        for state, meaning in STATES:
            states.add_row(state, meaning)
        with VerticalScroll(classes="dialog", id="help"):
            yield Label("frost-tui keys", classes="dialog-title")
            yield Static(keys)
            yield Label("States", classes="dialog-title")
            yield Static(states)
            yield Label("Press escape to close.", classes="setting-doc")
