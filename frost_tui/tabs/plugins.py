"""Tab 5, Plugins: the calculations this node can run, and the broken ones with their error."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from frost_core import NodeSnapshot, PluginView

from frost_tui.widgets.live_table import LiveTable
from frost_tui.widgets.redraw import update_static
from frost_tui.tabs.pane import Pane

COLUMNS = ("Name", "Source", "Version", "Hash", "Status")


class PluginsPane(Pane):
    """Press l to load a plugin from a file; a plugin that fails validation stays listed with why."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._plugins: dict[str, PluginView] = {}

    def compose(self) -> ComposeResult:
        yield LiveTable(*COLUMNS, id="plugins-table")
        yield Static(id="plugin-detail", classes="detail")

    def show(self, snapshot: NodeSnapshot, now: float) -> None:
        self._plugins = {plugin_key(p): p for p in snapshot.plugins}
        self.query_one(LiveTable).show_rows([(plugin_key(p), plugin_row(p)) for p in snapshot.plugins])
        self._show_detail()

    def on_live_table_row_highlighted(self, event: LiveTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        key = self.query_one(LiveTable).selected_key()
        plugin = self._plugins.get(key) if key else None
        update_static(self.query_one("#plugin-detail", Static), plugin,
                      lambda: describe_plugin(plugin) if plugin else "No plugins found: press l to load one from a file.")


def plugin_key(plugin: PluginView) -> str:
    return f"{plugin.source}:{plugin.name}:{plugin.path}"


def plugin_row(plugin: PluginView) -> tuple:
    status = Text("ok", style="green") if plugin.ok else Text("✗ " + (plugin.error or "broken"), style="bold red")
    return (plugin.name, plugin.source, plugin.version, plugin.hash[:12], status)


def describe_plugin(plugin: PluginView) -> Group:
    lines: list = [Text.assemble((plugin.name, "bold"), f"  {plugin.version}  {plugin.path}")]
    if plugin.description:
        lines.append(Text(plugin.description))
    if plugin.error:
        lines.append(Text.assemble(("Error  ", "bold red"), plugin.error))
    if plugin.params:
        table = Table("Parameter", "Type", "Default", "Meaning", box=None, padding=(0, 2), header_style="bold")
        for param in plugin.params:
            table.add_row(param.name, param.kind, repr(param.default), param.help)
        lines.append(table)
    return Group(*lines)
