"""Tab 8, Ledger: how much CPU this machine gave and received, per peer and per day, and who gives most."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

from frost_core import LedgerView, NodeSnapshot, counted

from frost_tui.stats import named
from frost_tui.tabs.pane import Pane
from frost_tui.widgets.chart import Chart, ChartData, Series, plot_dots
from frost_tui.widgets.live_table import LiveTable


class LedgerPane(Pane):
    """CPU in normalised seconds (this machine's speed units x seconds), from the node's ledger: what this
    host gave each peer's units and what this node's units received, the last 30 days; contributors are
    each node's own signed totals."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._shown: LedgerView | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="ledger-totals")
        yield Chart(id="ledger-chart")
        with Horizontal(id="ledger-tables"):
            yield LiveTable("Peer", "Given", "Recvd", id="ledger-peers")
            yield LiveTable("Day", "Given", "Recvd", id="ledger-days")
            yield LiveTable("Top giver", "Given", "Recvd", id="ledger-contributors")

    def on_mount(self) -> None:
        for table_id, title in (("#ledger-peers", "per peer"), ("#ledger-days", "per day (UTC)"),
                                ("#ledger-contributors", "cluster")):
            self.query_one(table_id, LiveTable).border_title = title

    def on_resize(self) -> None:
        self._shown = None   # the chart's pace follows its width

    def show(self, snapshot: NodeSnapshot, now: float) -> None:
        view = snapshot.ledger
        width = self.query_one("#ledger-chart", Chart).size.width
        if view == self._shown or not width:
            return
        self._shown = view
        refused = f" · {counted(view.refused, 'forged summary', 'forged summaries')} refused" if view.refused else ""
        self.query_one("#ledger-totals", Static).update(
            f"Given {cpu_text(view.given)} · received {cpu_text(view.received)} · last 30 days{refused}")
        values, seconds_per_dot = stretched(view.history, plot_dots(width))
        self.query_one("#ledger-chart", Chart).data = ChartData(
            title="CPU given per hour (speed units x s)", short_title="CPU given per hour", unit="s",
            seconds_per_dot=seconds_per_dot,
            series=(Series("given", "green", values),))
        self.query_one("#ledger-peers", LiveTable).show_rows(
            [(p.node_id, (named(p), cpu_text(p.given), cpu_text(p.received))) for p in view.peers])
        self.query_one("#ledger-days", LiveTable).show_rows(
            [(d.day, (d.day[5:], cpu_text(d.given), cpu_text(d.received))) for d in reversed(view.days)])
        self.query_one("#ledger-contributors", LiveTable).show_rows(
            [(c.node_id, (named(c), cpu_text(c.given), cpu_text(c.received))) for c in view.contributors])


def stretched(hourly: tuple[float, ...], dots: int) -> tuple[tuple[float, ...], float]:
    """Hourly figures over a chart `dots` wide, and the seconds a dot stands for: stretched to the whole width, so
    the time axis's left end is where the history begins (whole repeats of each hour left a blank margin that the
    axis counted: "-69 h" over 48 hours); on a chart narrower than the history, its last hours, one a dot."""
    if not hourly or dots <= len(hourly):
        return hourly[-dots:] if dots else (), 3600.0
    return tuple(hourly[i * len(hourly) // dots] for i in range(dots)), len(hourly) * 3600.0 / dots


def cpu_text(seconds: float) -> str:
    """CPU-seconds in at most five characters, for narrow columns: 42s, 36m, 1.5h, 2.1d."""
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    if seconds < 86400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"
