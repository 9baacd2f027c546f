"""Tab 7, Settings: the owner's policy (like BOINC's computing preferences), the join code, and joining another cluster.

The form is generated from core's option table, so each field carries that option's bounds
and documentation; saving sends the changed values to the node, which validates, writes the
config file and applies them live, but for those read only as the node or the UI starts
(`config.READ_AT_START`), which the save's notification names.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.validation import ValidationResult, Validator
from textual.widget import Widget
from textual.widgets import Button, Input, Label, Select, Static, Switch

from frost_core import OPTIONS, ClusterKey, ConfigError, JoinCluster, NodeSnapshot, Option, SaveSettings

from frost_tui.option_text import as_text, describe_accepts, parse_value
from frost_tui.tabs.pane import Pane

# Every option of core's table, a section per group, in the order an owner looks for them;
# a section missing here still shows, at the end, under its own name.
SECTION_TITLES = {
    "owner": "While you use this machine (owner policy)",
    "desk": "This desk",
    "guests": "Computing for others",
    "checkpoints": "Checkpoints",
    "cluster": "Cluster",
    "node": "This node on the network",
    "gossip": "Gossip and failure detection",
    "control": "Remote control",
    "log": "Log",
}
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (SECTION_TITLES.get(section, section), tuple(o.name for o in OPTIONS if o.section == section))
    for section in dict.fromkeys([*SECTION_TITLES, *(o.section for o in OPTIONS)])
    if any(o.section == section for o in OPTIONS)
)
_OPTIONS = {option.name: option for option in OPTIONS}


class OptionValidator(Validator):
    """Checks a typed value against the option's kind and bounds, with the option's own words."""

    def __init__(self, option: Option) -> None:
        super().__init__()
        self.option = option

    def validate(self, value: str) -> ValidationResult:
        try:
            parse_value(self.option, value)
        except ValueError as error:
            return self.failure(str(error))
        return self.success()


def field_id(name: str) -> str:
    return "opt-" + name.replace(".", "-").replace("_", "-")


def option_field(option: Option) -> Widget:
    """The widget that edits one option: a switch, a choice, or a checked line of text."""
    if option.kind is bool:
        return Switch(value=bool(option.default), id=field_id(option.name))
    if option.choices:
        return Select([(c, c) for c in option.choices], value=option.default, allow_blank=False,
                      id=field_id(option.name), classes="setting-input")
    return Input(as_text(option.default), id=field_id(option.name), validators=[OptionValidator(option)],
                 validate_on=["changed", "submitted"], classes="setting-input")


def form_widgets() -> list[Widget]:
    """The settings form's rows, a section per group, then the join code, joining another cluster, and the buttons."""
    widgets: list[Widget] = []
    for title, names in GROUPS:
        widgets.append(Label(title, classes="settings-group"))
        for name in names:
            option = _OPTIONS[name]
            widgets += [
                Horizontal(Label(name, classes="setting-name"), option_field(option),
                           Label(describe_accepts(option), classes="setting-accepts"), classes="setting"),
                Label(option.doc, classes="setting-doc"),
                Label("", id=field_id(name) + "-error", classes="setting-error"),
            ]
    return [*widgets, Label("Cluster join code", classes="settings-group"), Static(id="join-code"),
            Label("Join another cluster (j)", classes="settings-group"),
            Horizontal(Input(placeholder="its join code (FROST-...)", id="join-input"), Button("Join", id="join-button"),
                       id="join-row"),
            Label("This node leaves its cluster for that one at once, not while work of its cluster would be "
                  "stranded (the node says which).", classes="setting-doc"),
            Horizontal(Button("Save (ctrl+s)", id="settings-save", variant="primary"),
                       Button("Revert", id="settings-revert"), id="settings-buttons")]


class FormKeys(Widget, can_focus=True):
    """Where the keyboard rests when the Settings tab is shown: the arrow and page keys scroll the form, Tab goes on
    to its first field. Not the form itself: Textual restyles a widget and everything in it when its focus comes
    or goes, and the form is 435 widgets (each switch to the tab, or away from it, cost 0.26-0.40 s of CPU)."""

    DEFAULT_CSS = "FormKeys { height: 0; }"
    BINDINGS = [Binding(key, f"form('{action}')", show=False) for key, action in (
        ("up", "scroll_up"), ("down", "scroll_down"), ("home", "scroll_home"), ("end", "scroll_end"),
        ("pageup", "page_up"), ("pagedown", "page_down"))]

    def action_form(self, action: str) -> None:
        getattr(self.screen.query_one("#settings-form", VerticalScroll), f"action_{action}")()


class SettingsPane(Pane):
    """Fields follow the node's settings until the owner edits them; ctrl+s or Save sends them.

    The form is built when the tab is first shown. Its 435 widgets were most of the app's 502: the
    start-up and every restyle of the app went through them, on every tab (the first screen took
    801 ms with them, 226-364 without: bench/ui_startup.py)."""

    BINDINGS = [Binding("ctrl+s", "app.save_settings", "Save"), Binding("j", "join_field", "Join a cluster", show=False)]

    class Save(Message):
        """The owner asked to save; the app sends the command to the node."""

        def __init__(self, command: SaveSettings) -> None:
            super().__init__()
            self.command = command

    class Join(Message):
        """The owner asked to join the cluster of a well-formed join code; the app asks first, then sends it."""

        def __init__(self, command: JoinCluster, fingerprint: str) -> None:
            super().__init__()
            self.command = command
            self.fingerprint = fingerprint

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._loaded: dict[str, Any] = {}
        self._form_ready = False
        self._waiting: tuple[NodeSnapshot, float] | None = None

    def compose(self) -> ComposeResult:
        yield FormKeys()
        form = VerticalScroll(id="settings-form")
        form.can_focus = False   # (FormKeys scrolls it; a mouse wheel still does)
        yield form

    def main_widget(self) -> Widget:
        """The form's keys, not a field: number keys must still switch tabs."""
        return self.query_one(FormKeys)

    def show(self, snapshot: NodeSnapshot, now: float) -> None:
        if not self._form_ready:
            if self._waiting is None:
                self.call_later(self._build_form)
            self._waiting = (snapshot, now)   # the newest, shown once the form is there
            return
        self.query_one("#join-code", Static).update(
            f"{snapshot.cluster_join_code}\nGive this code to a colleague: `frost-tui key set CODE` on their desk "
            "joins it to this cluster, at once.")
        if snapshot.settings == self._loaded:
            return
        previous, self._loaded = self._loaded, dict(snapshot.settings)
        for title, names in GROUPS:
            for name in names:
                if name not in snapshot.settings:
                    continue
                if self._current_text(name) != as_text(previous.get(name, _OPTIONS[name].default)):
                    continue  # the owner is editing this field: keep their text
                self._set_field(name, snapshot.settings[name])

    async def _build_form(self) -> None:
        await self.query_one("#settings-form").mount_all(form_widgets())
        self._form_ready = True
        assert self._waiting is not None
        self.show(*self._waiting)

    def changed_values(self) -> dict[str, Any]:
        """Values that differ from the node's; raises ValueError naming the first invalid field."""
        if not self._form_ready:
            return {}   # never shown: nothing edited
        changed = {}
        for title, names in GROUPS:
            for name in names:
                option = _OPTIONS[name]
                widget = self.query_one("#" + field_id(name))
                value = widget.value if isinstance(widget, (Switch, Select)) else parse_value(option, widget.value)
                if value != self._loaded.get(name, option.default):
                    changed[name] = value
        return changed

    def request_save(self) -> None:
        try:
            values = self.changed_values()
        except ValueError as error:
            self.app.notify(str(error), title="Settings not saved", severity="error")
            return
        if not values:
            self.app.notify("Nothing changed.", title="Settings")
            return
        self.post_message(self.Save(SaveSettings(values=values)))

    def action_join_field(self) -> None:
        """The join field is at the end of a long form: j takes the cursor there (in a field, j is text)."""
        if not self._form_ready:
            return
        field = self.query_one("#join-input", Input)
        self.query_one("#join-button").scroll_visible(animate=False)
        field.focus()

    def request_join(self) -> None:
        """A code is checked here first: a typo is named at once, and nothing goes to the node."""
        field = self.query_one("#join-input", Input)
        try:
            key = ClusterKey.from_join_code(field.value)
        except ConfigError as error:
            self.app.notify(error.message if field.value.strip() else "Paste the other cluster's join code first.",
                            title="Not joined", severity="error")
            return
        field.value = ""
        snapshot = getattr(self.app, "snapshot", None)
        if snapshot is not None and snapshot.cluster_join_code == key.to_join_code():
            self.app.notify(f"This node is in cluster {key.fingerprint()} already.", title="Joined already")
            return
        self.post_message(self.Join(JoinCluster(code=key.to_join_code()), key.fingerprint()))

    def revert(self) -> None:
        if not self._form_ready:
            return
        loaded, self._loaded = self._loaded, {}
        for title, names in GROUPS:
            for name in names:
                self._set_field(name, loaded.get(name, _OPTIONS[name].default))
        self._loaded = loaded

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "join-input":
            return   # checked when the owner joins: a half-pasted code is no error yet
        error = self.query_one(f"#{event.input.id}-error", Label)
        result = event.validation_result
        message = "" if result is None or result.is_valid else "; ".join(result.failure_descriptions)
        error.update(message)
        error.set_class(bool(message), "-shown")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "settings-save":
            self.request_save()
        elif event.button.id == "settings-revert":
            self.revert()
        elif event.button.id == "join-button":
            self.request_join()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "join-input":
            self.request_join()

    def _current_text(self, name: str) -> str:
        return as_text(self.query_one("#" + field_id(name)).value)

    def _set_field(self, name: str, value: Any) -> None:
        widget = self.query_one("#" + field_id(name))
        widget.value = value if isinstance(widget, (Switch, Select)) else as_text(value)
