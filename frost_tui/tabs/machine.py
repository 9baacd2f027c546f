"""Tab 1, Machine: this machine's hosting state, recent resource history, thresholds, memory pool."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from frost_core import HostingView, NodeSnapshot, ResourceSample

from frost_tui.widgets.chart import Chart, ChartData, Series, plot_dots
from frost_tui.widgets.format import format_bytes, progress_bar, styled_state
from frost_tui.widgets.state_banner import StateBanner
from frost_tui.tabs.pane import Pane

# The node keeps ten minutes of one-second samples; the charts show all of them.
CHART_WINDOW_SECONDS = 600


class MachinePane(Pane):
    """What this desk is doing for the cluster, readable at a glance like htop's header."""

    _facts_key: tuple | None = None
    _shown: tuple[NodeSnapshot, float] | None = None

    def compose(self) -> ComposeResult:
        yield StateBanner(id="state-banner")
        with Horizontal(id="machine-body"):
            with Vertical(id="machine-charts"):
                yield Chart(id="chart-available")
                yield Chart(id="chart-cpu")
            with VerticalScroll(id="machine-facts"):   # desk rules and isolation lines may not fit a short terminal
                yield Static(id="machine-facts-text")

    def on_resize(self) -> None:
        """The charts' time scale follows their width: a tab drawn while hidden has none yet."""
        if self._shown is not None:
            self.show(*self._shown)

    def show(self, snapshot: NodeSnapshot, now: float) -> None:
        self._shown = (snapshot, now)
        banner = self.query_one(StateBanner)
        banner.now = now
        if banner.hosting != snapshot.hosting:
            banner.hosting = snapshot.hosting
        chart_width = self.query_one("#chart-available", Chart).size.width
        if chart_width:
            self._show_charts(snapshot, chart_width)
        alive = sum(1 for p in snapshot.peers if p.state == "alive" and not p.is_self)
        facts_key = (snapshot.hosting, len(snapshot.guests), alive, snapshot.name, snapshot.address)
        if facts_key != self._facts_key:
            self._facts_key = facts_key
            # With a layout: the facts' height follows their lines (an owner line or a desk rule more or fewer).
            self.query_one("#machine-facts-text", Static).update(describe_facts(snapshot.hosting, snapshot))

    def _show_charts(self, snapshot: NodeSnapshot, chart_width: int) -> None:
        seconds_per_dot = max(1, math.ceil(CHART_WINDOW_SECONDS / max(1, plot_dots(chart_width))))
        history = bucket_history(snapshot.history, seconds_per_dot)
        available = ChartData(
            title="Available",
            unit="",
            series=(Series("available (speed units)", "green", tuple(s.available for s in history)),),
            seconds_per_dot=seconds_per_dot,
        )
        cpu = ChartData(
            title="CPU, % of the machine",
            short_title="CPU %",
            unit="%",
            top=100.0,
            series=(
                Series("owner", "yellow", tuple(s.owner_cpu_percent for s in history)),
                Series("guests", "cyan", tuple(s.guest_cpu_percent for s in history)),
            ),
            seconds_per_dot=seconds_per_dot,
        )
        for chart_id, data in (("#chart-available", available), ("#chart-cpu", cpu)):
            chart = self.query_one(chart_id, Chart)
            if chart.data != data:
                chart.data = data


def bucket_history(history: Sequence[ResourceSample], seconds_per_dot: int) -> tuple[ResourceSample, ...]:
    """Average the samples over fixed slices of wall-clock time, keeping only finished slices.

    The slices are aligned to the clock and the window of slices shown ends at the newest
    finished one, leaving out the oldest (which loses a sample each second as the node's
    history slides): so a chart changes only when a slice completes, every few seconds, not
    on each one-second sample. Redrawing two wide charts every second was most of what the
    idle This machine tab cost.
    """
    if not history:
        return ()
    if seconds_per_dot == 1:
        return tuple(history)
    current = int(history[-1].at // seconds_per_dot)
    first = max(int(history[0].at // seconds_per_dot) + 1, current - (CHART_WINDOW_SECONDS // seconds_per_dot - 2))
    slices: dict[int, list[ResourceSample]] = {}
    for sample in history:
        number = int(sample.at // seconds_per_dot)
        if first <= number < current:
            slices.setdefault(number, []).append(sample)
    return tuple(
        ResourceSample(
            at=number * seconds_per_dot,
            available=sum(s.available for s in samples) / len(samples),
            owner_cpu_percent=sum(s.owner_cpu_percent for s in samples) / len(samples),
            guest_cpu_percent=sum(s.guest_cpu_percent for s in samples) / len(samples),
        )
        for number, samples in slices.items()
    )


def describe_facts(hosting: HostingView, snapshot: NodeSnapshot) -> Table:
    """The figures the transfer policy decides on, next to the charts that show their history."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    pool = hosting.memory_pool_bytes
    used = hosting.memory_used_bytes
    memory = progress_bar(used / pool if pool else 0.0, width=14)
    memory.append(f"\n{format_bytes(used)} of {format_bytes(pool)}")   # its own line: never cut between 0 and B
    table.add_row("State", styled_state(hosting.state))
    table.add_row("Transfer mode", styled_state(hosting.transfer_mode))
    # What one more guest would get, averaged over the known nodes (FROST's S_avg of R), not the chart's "available":
    # all guests together, here alone. The thresholds lie around it.
    table.add_row("Average offer", f"{hosting.system_average:.2f}")
    table.add_row("Lower threshold", f"{hosting.lower_threshold:.2f}")
    table.add_row("Upper threshold", f"{hosting.upper_threshold:.2f}")
    table.add_row("Memory pool", memory)
    table.add_row("CPUs for guests", str(hosting.guest_cpus))
    table.add_row("Guests here", str(len(snapshot.guests)))
    alive = sum(1 for p in snapshot.peers if p.state == "alive" and not p.is_self)
    table.add_row("Peers alive", str(alive))
    table.add_row("Presence", Text(hosting.presence_brief or hosting.presence or "not read yet"))
    table.add_row("Sleep", Text(hosting.sleep_brief or hosting.sleep or "not watched"))
    if hosting.owner:
        table.add_row("Owner policy", Text(hosting.owner[0]))
    for line in hosting.owner[1:]:
        table.add_row("Desk rule", Text(line))
    for number, line in enumerate(hosting.isolation):
        style = "bold yellow" if line.startswith("warning:") else ""
        table.add_row("Guest isolation" if number == 0 else "", Text(line, style=style))
    table.add_row("Node", Text(f"{snapshot.name}  {snapshot.address}  {snapshot.node_id[:8]}"))
    return table
