"""Tab 5, Plugins: the calculations this node can run, and the broken ones with their error."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from frost_core import NodeSnapshot, PluginView, RemovePlugin

from frost_tui.dialogs.small import ConfirmDialog
from frost_tui.widgets.live_table import LiveTable
from frost_tui.widgets.redraw import update_static
from frost_tui.tabs.pane import Pane

COLUMNS = ("Name", "Source", "Version", "Hash", "Status")


REMOVABLE = ("added", "cluster")


class PluginsPane(Pane):
    """Press l to load a plugin file or folder, r to remove one you added; a broken one stays listed with why."""

    BINDINGS = [Binding("l", "app.load_plugin", "Load plugin"), Binding("r", "remove_plugin", "Remove plugin")]

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

    def selected_plugin(self) -> PluginView | None:
        key = self.query_one(LiveTable).selected_key()
        return self._plugins.get(key) if key else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Removing a plugin changes the node: a watching UI does not offer it, by the app's own rule."""
        return self.app.check_action(action, parameters)

    def action_remove_plugin(self) -> None:
        """Ask, then have the node forget the selected plugin's copies (through its API, like the CLI)."""
        plugin = self.selected_plugin()
        if plugin is None:
            self.app.notify("Select a plugin first.", title="No plugin selected", severity="warning")
            return
        if plugin.source not in REMOVABLE:
            self.app.notify(f"{plugin.name} is {plugin.source}: only plugins added with l can be removed.",
                            title="Cannot remove", severity="warning")
            return
        copies = sum(1 for p in self._plugins.values() if p.name == plugin.name and p.source in REMOVABLE)
        which = f"{plugin.name} ({plugin.path})" if copies == 1 else f"Every copy of {plugin.name} ({copies})"
        text = f"{which} is forgotten by this node; assignments can no longer use it."
        self.app.push_screen(ConfirmDialog(f"Remove {plugin.name}?", text, "Remove"),
                             lambda yes: self.app.send(RemovePlugin(name=plugin.name)) if yes else None)

    def _show_detail(self) -> None:
        plugin = self.selected_plugin()
        update_static(self.query_one("#plugin-detail", Static), plugin,
                      lambda: describe_plugin(plugin) if plugin else "No plugins found: press l to load one from a file or folder.")


def plugin_key(plugin: PluginView) -> str:
    """Unique per copy: two adds of one edited file share name, source and path, never their code's hash."""
    return f"{plugin.source}:{plugin.name}:{plugin.hash}:{plugin.path}"


def plugin_row(plugin: PluginView) -> tuple:
    if not plugin.ok:
        status = Text("✗ " + (plugin.error or "broken"), style="bold red")
    elif plugin.superseded_by:
        status = Text(f"ok, superseded by {plugin.superseded_by[:12]}", style="dim")
    elif plugin.gang:
        status = Text("ok (gang)", style="green")
    else:
        status = Text("ok", style="green")
    return (plugin.name, plugin.source, plugin.version, plugin.hash[:12], status)


def describe_plugin(plugin: PluginView) -> Group:
    lines: list = [Text.assemble((plugin.name, "bold"), f"  {plugin.version}  {plugin.path}")]
    if plugin.description:
        lines.append(Text(plugin.description))
    if plugin.error:
        lines.append(Text.assemble(("Error  ", "bold red"), plugin.error))
    if plugin.gang:
        lines.append(Text("A gang plugin: its members step together and exchange messages at each superstep. "
                          "An assignment runs as one gang of p members on p hosts; its author can also run it in "
                          "one process with run_gang_locally (docs/plugins.md)."))
    if plugin.params:
        table = Table("Parameter", "Type", "Default", "Meaning", box=None, padding=(0, 2), header_style="bold")
        for param in plugin.params:
            table.add_row(param.name, param.kind, repr(param.default), param.help)
        lines.append(table)
    return Group(*lines)
