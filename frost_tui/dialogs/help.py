"""The `?` help screen: every key (the current tab's first), what it does, and what the state words mean."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

KEYS: tuple[tuple[str, str], ...] = (  # on every tab
    ("1 … 8", "Machine, Guests, Peers, Assignments, Plugins, Events, Settings, Ledger (in a text field a digit is "
              "text: press escape first)"),
    ("escape", "leave a field; clear and leave the filter; close a dialog"),
    ("p", "pause hosting at once / resume"),
    ("e", "evict every guest now: checkpoint and send each one away (no confirmation); others may still come, "
          "p takes none"),
    ("f", "finish the current guests, then pause"),
    ("s", "submit an assignment; the Assignments tab then shows it selected"),
    ("l", "load a plugin from a file"),
    ("ctrl+p", "command palette (tabs first; evicting and cancelling ask first)"),
    ("q", "quit: says what happens to the guests here and to your running assignments, and asks"),
    ("ctrl+q / ctrl+c", "quit now without asking (guests restart elsewhere from their last checkpoints)"),
    ("?", "this help"),
)
# The keys that act on what a tab shows, by tab id: they work only there.
COLUMNS = "pick the columns shown (kept between runs; a state column always shows)"
TAB_KEYS: dict[str, tuple[tuple[str, str], ...]] = {
    "guests": (
        ("↑ ↓", "select a guest"),
        ("enter", "everything about the selected guest"),
        ("x", "evict the selected guest; asks when work since its checkpoint would be lost"),
        ("m", "move the selected guest to a peer you choose"),
        ("t", "a tree of assignments, each with its guests' totals, or the flat list again (kept between runs)"),
        ("- *", "in the tree: fold or unfold the selected assignment; all of them"),
        ("v", COLUMNS),
    ),
    "peers": (
        ("↑ ↓", "select a peer"),
        ("enter", "everything about the selected peer"),
        ("/", "filter the peers (escape clears the filter)"),
        ("o", "sort by the next column; a click on a header sorts by it, a second click reverses"),
        ("u", "trust a quarantined peer again: this node's master sends it units again"),
        ("v", COLUMNS),
    ),
    "assignments": (
        ("↑ ↓ tab", "select an assignment, tab to its units"),
        ("enter", "the selected assignment (or unit) in full"),
        ("/", "find units of the selected assignment: a number, a state, a host (escape lists the usual ones)"),
        ("c", "cancel the selected assignment (asks first)"),
        ("m", "move the selected unit (a running one) to a peer you choose"),
        ("w", "save the selected assignment's result to a file"),
        ("v", COLUMNS + " (of the table the cursor is in)"),
    ),
    "plugins": (("↑ ↓", "select a plugin"), ("r", "remove the selected plugin (one you added with l)")),
    "events": (("↑ ↓", "select an event"), ("/", "filter the events (escape clears the filter)")),
    "settings": (("↑ ↓ pgup pgdn", "scroll the form"), ("tab", "next field"), ("ctrl+s", "save settings"),
                 ("j", "join another cluster: its join code in the field at the end, then enter; this node leaves "
                       "its cluster for it (asks first)")),
}

STATES: tuple[tuple[str, str], ...] = (
    ("hosting", "guests run here at the lowest priority"),
    ("idle", "nothing to run; this machine offers its CPU"),
    ("paused", "you paused hosting; guests are stopped and nothing is offered (after a while they go on to other "
               "peers: owner.pause_evict_after)"),
    ("owner active", "you are using the machine: guests are suspended, then evicted"),
    ("holding", "guests may run but no new one is taken: measuring this machine, a full disk, or a while after "
                "your use evicted them"),
    ("evicting", "guests are being checkpointed and sent to other peers"),
    ("finishing", "current guests finish, nothing new is taken, then pause"),
)


class HelpScreen(ModalScreen[None]):
    """The keys of the tab in view first, then the ones that work everywhere, then the other tabs'."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def __init__(self, tab_id: str, tab_titles: dict[str, str]) -> None:
        super().__init__()
        self.tab_id = tab_id
        self.tab_titles = tab_titles

    def compose(self) -> ComposeResult:
        keys = Table("Key", "Action", box=None, padding=(0, 2), header_style="bold")
        here = TAB_KEYS.get(self.tab_id, ())
        if here:
            keys.add_row(f"[b]On {self.tab_titles[self.tab_id]}[/b]", "")
            for key, action in here:
                keys.add_row(key, action)
            keys.add_row("", "")
        keys.add_row("[b]Everywhere[/b]", "")
        for key, action in KEYS:
            keys.add_row(key, action)
        for tab_id, tab_keys in TAB_KEYS.items():
            if tab_id != self.tab_id:
                keys.add_row("", "")
                keys.add_row(f"[b]On {self.tab_titles[tab_id]}[/b]", "")
                for key, action in tab_keys:
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
