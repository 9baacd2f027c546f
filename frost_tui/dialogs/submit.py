"""The submit dialog: a form generated from the chosen plugin's declared parameters."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.validation import ValidationResult, Validator
from textual.widgets import Button, Input, Label, Select, Switch

from frost_core import ParamView, PluginView, SubmitAssignment


def parse_param(param: ParamView, text: str) -> Any:
    """The owner's text as the parameter's type, or ValueError naming the parameter and the rule."""
    text = text.strip()
    if param.kind == "str":
        value: Any = text
    else:
        try:
            value = int(text) if param.kind == "int" else float(text)
        except ValueError:
            kind = "a whole number" if param.kind == "int" else "a number"
            raise ValueError(f"{param.name} must be {kind}") from None
    if param.minimum is not None and value < param.minimum:
        raise ValueError(f"{param.name} must be at least {param.minimum:g}")
    if param.maximum is not None and value > param.maximum:
        raise ValueError(f"{param.name} must be at most {param.maximum:g}")
    if param.choices and value not in param.choices:
        raise ValueError(f"{param.name} must be one of {', '.join(map(str, param.choices))}")
    return value


class ParamValidator(Validator):
    def __init__(self, param: ParamView) -> None:
        super().__init__()
        self.param = param

    def validate(self, value: str) -> ValidationResult:
        try:
            parse_param(self.param, value)
        except ValueError as error:
            return self.failure(str(error))
        return self.success()


class SubmitDialog(ModalScreen[SubmitAssignment | None]):
    """Choose a plugin, fill its parameters (checked as you type), press enter or Submit."""

    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, plugins: list[PluginView]) -> None:
        super().__init__()
        self.plugins = {p.name: p for p in plugins if p.ok}
        self._form_for: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="submit-dialog"):
            yield Label("Submit an assignment", classes="dialog-title")
            if not self.plugins:
                yield Label("No working plugin is loaded: press l on the main screen to load one.")
            options = [(name, name) for name in self.plugins]
            first = options[0][1] if options else Select.BLANK
            yield Select(options, value=first, allow_blank=not options, id="submit-plugin")
            yield VerticalScroll(id="submit-params")
            yield Label("", id="submit-error", classes="setting-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Submit", id="submit", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    async def on_mount(self) -> None:
        await self._build_form()

    async def on_select_changed(self, event: Select.Changed) -> None:
        await self._build_form()

    def selected_plugin(self) -> PluginView | None:
        value = self.query_one("#submit-plugin", Select).value
        return self.plugins.get(value) if isinstance(value, str) else None

    async def _build_form(self) -> None:
        """The selected plugin's fields; left alone if they are already shown.

        The Select also reports its first value once it is mounted: rebuilding then would throw
        away whatever the owner has typed meanwhile.
        """
        plugin = self.selected_plugin()
        name = plugin.name if plugin is not None else None
        if name == self._form_for and name is not None:
            return
        self._form_for = name
        container = self.query_one("#submit-params", VerticalScroll)
        await container.remove_children()
        if plugin is None:
            return
        rows = []
        if plugin.description:
            rows.append(Label(plugin.description, classes="setting-doc"))
        for param in plugin.params:
            if param.kind == "bool":
                field: Any = Switch(value=bool(param.default), id=f"param-{param.name}")
            elif param.choices:
                field = Select([(str(c), c) for c in param.choices], value=param.default, allow_blank=False,
                               id=f"param-{param.name}")
            else:
                field = Input(
                    "" if param.default is None else str(param.default),
                    id=f"param-{param.name}",
                    validators=[ParamValidator(param)],
                    validate_on=["changed", "submitted"],
                    classes="setting-input",
                )
            rows.append(Horizontal(Label(param.name, classes="setting-name"), field,
                                   Label(param.help, classes="setting-doc"), classes="setting"))
            rows.append(Label("", id=f"param-{param.name}-error", classes="setting-error"))
        await container.mount_all(rows)

    def collect(self) -> SubmitAssignment:
        """The command for the filled form; ValueError names the first parameter that is wrong."""
        plugin = self.selected_plugin()
        if plugin is None:
            raise ValueError("choose a plugin first")
        params: dict[str, Any] = {}
        for param in plugin.params:
            widget = self.query_one(f"#param-{param.name}")
            if isinstance(widget, (Switch, Select)):
                params[param.name] = widget.value
            else:
                params[param.name] = parse_param(param, widget.value)
        return SubmitAssignment(plugin=plugin.name, params=params)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id is None or not event.input.id.startswith("param-"):
            return
        errors = self.query(f"#{event.input.id}-error")
        if not errors:
            return  # the form was rebuilt for another plugin meanwhile
        error = errors.first(Label)
        result = event.validation_result
        message = "" if result is None or result.is_valid else "; ".join(result.failure_descriptions)
        error.update(message)
        error.set_class(bool(message), "-shown")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "submit":
            self._submit()
        else:
            self.dismiss(None)

    def _submit(self) -> None:
        try:
            command = self.collect()
        except ValueError as error:
            label = self.query_one("#submit-error", Label)
            label.update(str(error))
            label.add_class("-shown")
            return
        self.dismiss(command)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
