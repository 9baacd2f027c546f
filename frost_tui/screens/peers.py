"""Tab 3, Peers: the cluster's resource table, sortable and filterable, suspects marked."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Input, Static

from frost_core.snapshot import NodeSnapshot, PeerView

from ..widgets.format import format_ago, format_bytes, format_clock, styled_state
from ..widgets.table_sync import selected_key, sync_table, update_static
from .pane import Pane

COLUMNS = ("Name", "Address", "State", "Available", "CPUs", "Free memory", "Guests", "Mode", "Last heard", "RTT")
# How each column sorts: a key function of the peer, so sorting uses numbers, not their text.
SORT_KEYS = (
    lambda p: p.name.lower(),
    lambda p: p.address,
    lambda p: ("alive", "suspect", "dead", "left").index(p.state) if p.state in ("alive", "suspect", "dead", "left") else 9,
    lambda p: -p.available,
    lambda p: -p.cpus,
    lambda p: -p.free_memory,
    lambda p: -p.guests,
    lambda p: p.mode,
    lambda p: -p.last_seen,
    lambda p: p.rtt_ms if p.rtt_ms is not None else float("inf"),
)


class PeersPane(Pane):
    """Every node this one knows of, itself included (marked ★)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._peers: dict[str, PeerView] = {}
        self._sort_column = 3
        self._snapshot: NodeSnapshot | None = None
        self._now = 0.0

    def compose(self) -> ComposeResult:
        yield Input(placeholder="/ filter peers by name, address, state or mode", id="peers-filter")
        table: DataTable = DataTable(id="peers-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(*COLUMNS)
        yield table
        yield Static("No peer selected.", id="peer-detail", classes="detail")

    def show(self, snapshot: NodeSnapshot, now: float) -> None:
        self._snapshot, self._now = snapshot, now
        self._peers = {p.node_id: p for p in snapshot.peers}
        needle = self.query_one("#peers-filter", Input).value.strip().lower()
        peers = [p for p in snapshot.peers if matches(p, needle)]
        peers.sort(key=SORT_KEYS[self._sort_column])
        table = self.query_one(DataTable)
        sync_table(table, [(p.node_id, peer_row(p, now)) for p in peers])
        table.border_subtitle = f"{len(peers)} of {len(snapshot.peers)} · sorted by {COLUMNS[self._sort_column]}"
        self._show_detail()

    def focus_main(self) -> None:
        self.query_one(DataTable).focus()

    def focus_filter(self) -> bool:
        self.query_one("#peers-filter", Input).focus()
        return True

    def sort_by(self, column: int) -> None:
        self._sort_column = column
        self._redraw()

    def selected_peer(self) -> PeerView | None:
        key = selected_key(self.query_one(DataTable))
        return self._peers.get(key) if key else None

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        self.sort_by(event.column_index)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(DataTable).focus()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _redraw(self) -> None:
        if self._snapshot is not None:
            self.show(self._snapshot, self._now)

    def _show_detail(self) -> None:
        peer = self.selected_peer()
        now = int(self._now)
        update_static(self.query_one("#peer-detail", Static), (peer, now),
                      lambda: describe_peer(peer, now) if peer else "No peer selected.", layout=False)


def matches(peer: PeerView, needle: str) -> bool:
    if not needle:
        return True
    return any(needle in field.lower() for field in (peer.name, peer.address, peer.state, peer.mode, peer.node_id))


def peer_row(peer: PeerView, now: float) -> tuple:
    name = Text(("★ " if peer.is_self else "") + peer.name)
    if peer.state in ("suspect", "dead"):
        name = Text(("? " if peer.state == "suspect" else "✗ ") + peer.name, style=styled_state(peer.state).style)
    return (
        name,
        peer.address,
        styled_state(peer.state),
        f"{peer.available:.2f}",
        str(peer.cpus),
        format_bytes(peer.free_memory),
        str(peer.guests),
        styled_state(peer.mode),
        "now" if peer.is_self else format_ago(peer.last_seen, now),
        "—" if peer.rtt_ms is None else f"{peer.rtt_ms:.1f} ms",
    )


def describe_peer(peer: PeerView, now: float) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_column(style="bold")
    table.add_column()
    table.add_row("Node id", peer.node_id, "Incarnation", str(peer.incarnation))
    table.add_row("State", styled_state(peer.state), "Protocol", f"v{peer.protocol_version}")
    table.add_row("Idle extremity", f"{peer.idle_extremity:.2f}", "Heavy extremity", f"{peer.heavy_extremity:.2f}")
    table.add_row("Last heard", f"{format_clock(peer.last_seen)} ({format_ago(peer.last_seen, now)})", "Mode", peer.mode)
    return table
