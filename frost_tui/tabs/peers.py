"""Tab 3, Peers: the cluster's resource table, sortable and filterable, suspects marked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input, Static

from frost_core import NodeSnapshot, PeerView

from frost_tui.widgets.format import format_ago, format_bytes, format_clock, sparkline, styled_state
from frost_tui.widgets.live_table import LiveTable
from frost_tui.widgets.redraw import update_static
from frost_tui.tabs.pane import Pane

COLUMNS = ("Name", "Address", "State", "Available", "Last minute", "CPUs", "Free memory", "Guests", "Mode",
           "Last heard", "RTT")
# At 80 columns these make way first: Name, State, Available, Mode and RTT always show.
DROP_ORDER = (4, 1, 6, 9, 5, 7)
RECENTLY_HEARD_SECONDS = 3.0
TREND_STEP = 6.0            # seconds each character of a peer's "Last minute" stands for
TREND_LENGTH = 10           # characters: a minute of what the peer offered
# How each column sorts first: a key function of the peer (numbers, not their text), and whether
# that order is descending (most available first); sorting by the same column again reverses it.
SORT_KEYS: tuple[tuple[Callable[[PeerView], Any], bool] | None, ...] = (
    (lambda p: p.name.lower(), False),
    (lambda p: p.address, False),
    (lambda p: ("alive", "suspect", "dead", "left").index(p.state) if p.state in ("alive", "suspect", "dead", "left")
     else 9, False),
    (lambda p: p.available, True),
    None,                               # the last minute: a picture, not an order (o passes it by)
    (lambda p: p.cpus, True),
    (lambda p: p.free_memory, True),
    (lambda p: p.guests, True),
    (lambda p: p.mode, False),
    (lambda p: p.last_seen, True),
    (lambda p: p.rtt_ms if p.rtt_ms is not None else float("inf"), False),
)


class PeersPane(Pane):
    """Every node this one knows of, itself included (marked ★)."""

    BINDINGS = [Binding("o", "app.sort_peers", "Sort"), Binding("u", "app.unquarantine", "Trust again"),
                Binding("v", "app.choose_columns", "Columns"), Binding("slash", "app.filter", "Filter")]

    class Sorted(Message):
        """The owner sorted the table: by the column of this title, this way round."""

        def __init__(self, column: str, descending: bool) -> None:
            super().__init__()
            self.column = column
            self.descending = descending

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._peers: dict[str, PeerView] = {}
        self._sort_column = 3
        self._descending = True   # most available first
        self._snapshot: NodeSnapshot | None = None
        self._now = 0.0
        self._rows: dict[str, tuple[tuple, tuple]] = {}  # node id -> (what the row shows, the row)
        self._offered: dict[str, dict[int, float]] = {}  # node id -> {TREND_STEPs since 0: what it offered}

    def compose(self) -> ComposeResult:
        yield Input(placeholder="/ filter peers by name, address, state or mode", id="peers-filter")
        yield LiveTable(*COLUMNS, id="peers-table", drop_order=DROP_ORDER)
        yield Static("No peer selected.", id="peer-detail", classes="detail")

    def show(self, snapshot: NodeSnapshot, now: float) -> None:
        self._snapshot, self._now = snapshot, now
        self._peers = {p.node_id: p for p in snapshot.peers}
        self._note_offers(snapshot.peers, now)
        needle = self.query_one("#peers-filter", Input).value.strip().lower()
        peers = [p for p in snapshot.peers if matches(p, needle)]
        sort_key = SORT_KEYS[self._sort_column]
        assert sort_key is not None
        peers.sort(key=sort_key[0], reverse=self._descending)
        table = self.query_one(LiveTable)
        table.show_sort(self._sort_column, self._descending)
        table.show_rows([(p.node_id, self._row(p, now)) for p in peers])
        way = "descending" if self._descending else "ascending"
        subtitle = f"{len(peers)} of {len(snapshot.peers)} · sorted by {COLUMNS[self._sort_column]}, {way}"
        if table.border_subtitle != subtitle:  # setting it repaints the whole table, even to the same text
            table.border_subtitle = subtitle
        self._show_detail()

    def _note_offers(self, peers: tuple[PeerView, ...], now: float) -> None:
        """Each peer's offer, the latest of every TREND_STEP of the last minute: the UI keeps the minute itself (a
        peer gossips only its figure now), and only while this tab is in view (the app redraws no other)."""
        step = int(now // TREND_STEP)
        for peer in peers:
            offered = self._offered.setdefault(peer.node_id, {})
            for old in [s for s in offered if not step - TREND_LENGTH < s <= step]:   # (or a clock set back)
                del offered[old]
            offered[step] = peer.available
        for gone in self._offered.keys() - self._peers.keys():
            del self._offered[gone]

    def _row(self, peer: PeerView, now: float) -> tuple:
        """The peer's row, built again only when something it shows changed."""
        offered, step = self._offered.get(peer.node_id, {}), int(now // TREND_STEP)
        trend = sparkline([offered.get(s) for s in range(step - TREND_LENGTH + 1, step + 1)],   # blank: not in view
                          top=peer.idle_extremity or peer.available)
        shown = (peer.name, peer.is_self, peer.address, peer.state, peer.available, trend, peer.cpus,
                 peer.free_memory, peer.guests, peer.mode, peer.rtt_ms, last_heard(peer, now), peer.quarantined)
        cached = self._rows.get(peer.node_id)
        if cached is None or cached[0] != shown:
            cached = (shown, peer_row(peer, now, trend))
            self._rows[peer.node_id] = cached
        return cached[1]

    def sort_by(self, column: int) -> None:
        """Sort by this column in its natural order; by the same column again, the other way round."""
        sort_key = SORT_KEYS[column]
        if sort_key is None:
            return
        if column == self._sort_column:
            self._descending = not self._descending
        else:
            self._sort_column, self._descending = column, sort_key[1]
        self.post_message(self.Sorted(COLUMNS[column], self._descending))
        self._redraw()

    def sort_as(self, column: str, descending: bool) -> None:
        """Sort as the owner last did (a column of another version's table is ignored)."""
        if column in COLUMNS and SORT_KEYS[COLUMNS.index(column)] is not None:
            self._sort_column, self._descending = COLUMNS.index(column), descending

    def sort_by_next(self) -> None:
        column = (self._sort_column + 1) % len(COLUMNS)
        while SORT_KEYS[column] is None:
            column = (column + 1) % len(COLUMNS)
        self.sort_by(column)

    def details(self) -> tuple[str, Table] | None:
        peer = self.selected_peer()
        return (f"Peer {peer.name}", describe_peer(peer_facts(peer, self._now))) if peer else None

    def selected_peer(self) -> PeerView | None:
        key = self.query_one(LiveTable).selected_key()
        return self._peers.get(key) if key else None

    def on_live_table_header_selected(self, event: LiveTable.HeaderSelected) -> None:
        self.sort_by(event.column_index)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(LiveTable).focus()

    def on_live_table_row_highlighted(self, event: LiveTable.RowHighlighted) -> None:
        self._show_detail()

    def _redraw(self) -> None:
        if self._snapshot is not None:
            self.show(self._snapshot, self._now)

    def _show_detail(self) -> None:
        peer = self.selected_peer()
        now = self._now
        facts = peer_facts(peer, now) if peer else None
        update_static(self.query_one("#peer-detail", Static), facts,
                      lambda: describe_peer(facts) if facts else "No peer selected.", layout=False)


def matches(peer: PeerView, needle: str) -> bool:
    if not needle:
        return True
    return any(needle in field.lower() for field in (peer.name, peer.address, peer.state, peer.mode, peer.node_id))


def peer_row(peer: PeerView, now: float, trend: str) -> tuple:
    name = Text(("★ " if peer.is_self else "") + peer.name)
    if peer.state in ("suspect", "dead"):
        name = Text(("? " if peer.state == "suspect" else "✗ ") + peer.name, style=styled_state(peer.state).style)
    return (
        name,
        peer.address,
        styled_state("quarantined" if peer.quarantined else peer.state),
        f"{peer.available:.2f}",
        Text(trend, style="green"),
        str(peer.cpus),
        format_bytes(peer.free_memory),
        str(peer.guests),
        styled_state(peer.mode),
        last_heard(peer, now),
        "—" if peer.rtt_ms is None else f"{peer.rtt_ms:.1f} ms",
    )


def last_heard(peer: PeerView, now: float) -> str:
    """"now" for a peer heard within the last few gossip rounds, else how long ago.

    Live peers are heard about every second, so an exact age would flip every row between
    "now" and "1s ago" on every redraw: noise for the owner, and a full-table repaint.
    """
    if peer.is_self or now - peer.last_seen < RECENTLY_HEARD_SECONDS:
        return "now"
    return format_ago(peer.last_seen, now)


def peer_facts(peer: PeerView, now: float) -> tuple[tuple[str, str | Text, str, str], ...]:
    """What the detail pane says, as text: it is redrawn only when this changes."""
    heard = last_heard(peer, now)
    if heard != "now":
        heard = f"{format_clock(peer.last_seen)} ({heard})"
    return (
        ("Node id", peer.node_id, "Incarnation", str(peer.incarnation)),
        ("State", styled_state(peer.state), "Protocol", f"v{peer.protocol_version}"),
        ("Idle extremity", f"{peer.idle_extremity:.2f}", "Heavy extremity", f"{peer.heavy_extremity:.2f}"),
        ("Last heard", heard, "Mode", peer.mode),
        *((("Quarantined", peer.quarantined, "Clear with", f"frost-tui unquarantine {peer.node_id[:8]}"),)
          if peer.quarantined else ()),
    )


def describe_peer(facts: tuple[tuple[str, str | Text, str, str], ...]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_column(style="bold")
    table.add_column()
    for row in facts:
        table.add_row(*row)
    return table
