"""The submit dialog: a form generated from the chosen plugin's declared parameters and input files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.validation import ValidationResult, Validator
from textual.widgets import Button, Input, Label, Select, Switch

from frost_core import ConfigError, ParamView, PluginView, SubmitAssignment

from frost_tui.check_every import parse_check_every

KIND_WORDS = {"int": "a whole number", "float": "a number"}


class FieldError(ValueError):
    """What is wrong with the form, and the id of the field to show it under."""

    def __init__(self, message: str, field_id: str | None = None) -> None:
        super().__init__(message)
        self.field_id = field_id


def parse_param(param: ParamView, text: str) -> Any:
    """The owner's text as the parameter's type, or ValueError naming the parameter and the rule."""
    text = text.strip()
    if param.kind in ("str", "inputs"):
        value: Any = text
    else:
        try:
            value = int(text) if param.kind == "int" else float(text)
        except ValueError:
            raise ValueError(f"{param.name} must be {KIND_WORDS[param.kind]}, not {text!r}") from None
    if param.minimum is not None and value < param.minimum:
        raise ValueError(f"{param.name} must be at least {param.minimum:g}")
    if param.maximum is not None and value > param.maximum:
        raise ValueError(f"{param.name} must be at most {param.maximum:g}")
    if param.choices and value not in param.choices:
        raise ValueError(f"{param.name} must be one of {', '.join(map(str, param.choices))}")
    return value


def input_names(text: str) -> list[str]:
    """The file names an "inputs" parameter lists, each once, in order."""
    return list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))


def input_file(name: str, text: str, files_on: str | None = None) -> str:
    """The absolute path of the file given for input `name`, or ValueError saying what is wrong. `files_on`: the
    node whose machine holds the file (a UI attached over the network), where nothing here can check it."""
    if files_on is not None:
        if not Path(text.strip()).is_absolute():
            raise ValueError(f"input file {name!r}: give its whole path on the machine of {files_on}, from / on")
        return text.strip()
    if not text.strip():
        raise ValueError(f"input file {name!r}: give the path of a file on this machine")
    path = Path(text.strip()).expanduser().resolve()
    if not path.is_file():
        raise ValueError(f"input file {name!r}: {path} is not a file" if path.exists()
                         else f"input file {name!r}: {path} does not exist")
    return str(path)


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


def verify_fraction(text: str) -> float | None:
    """The verify field: empty for the node's default (cluster.verify), else a fraction from 0 to 1."""
    if not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise FieldError(f"verify takes a fraction from 0 to 1, not {text.strip()!r}", "submit-verify")
    return value


def check_cadence(text: str) -> tuple[float | None, int | None, bool]:
    """The check-every field, as `submit --check-every` reads it: empty for the node's [gang] defaults."""
    if not text.strip():
        return None, None, False
    try:
        return parse_check_every(text)
    except ConfigError as error:
        raise FieldError(error.message.replace("--check-every", "check every"), "submit-check-every") from None


def field_row(label: str, field: Any, help_text: str, field_id: str) -> list:
    """One form line (name, field, meaning) and the line under it where its error shows."""
    return [Horizontal(Label(label, classes="setting-name"), field, Label(help_text, classes="setting-doc"),
                       classes="setting"),
            Label("", id=f"{field_id}-error", classes="setting-error")]


MIN_FORM_ROWS = 3


class SubmitDialog(ModalScreen[SubmitAssignment | None]):
    """Choose a plugin, fill its parameters and input files (checked as you type), press enter or Submit."""

    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, plugins: list[PluginView], *, first: str | None = None, files_on: str | None = None) -> None:
        """`first`: the plugin chosen when the dialog opens (the one of the owner's last assignment), if it works.
        `files_on`: the node whose machine holds the input files, when it is not this one (`input_file`)."""
        super().__init__()
        self._files_on = files_on
        self.plugins = {p.name: p for p in plugins if p.ok and not p.superseded_by}
        self._first = first if first in self.plugins else next(iter(self.plugins), None)
        self._form_for: str | None = None
        self._paths: dict[str, str] = {}   # input name -> the path typed for it, kept while names change
        self._file_ids: dict[str, str] = {}  # input name -> the id of its path field

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="submit-dialog"):
            yield Label("Submit an assignment", classes="dialog-title")
            if not self.plugins:
                yield Label("No working plugin is loaded: press l on the main screen to load one.")
            options = [(name, name) for name in self.plugins]
            # The form scrolls between the title and the buttons, which stay in view on a small terminal. Not
            # focusable: Tab goes from field to field, never to the invisible container.
            with VerticalScroll(id="submit-body", can_focus=False):
                yield Select(options, value=self._first or Select.BLANK, allow_blank=not options, id="submit-plugin")
                yield Vertical(id="submit-params")
                with Vertical(id="submit-unit-options", classes="submit-options"):   # a unit plugin's
                    with Horizontal(classes="setting"):
                        yield Label("one per host", classes="setting-name")
                        yield Switch(value=False, id="submit-one-per-host")
                        yield Label("at most one unit of this assignment on each machine at a time (FROST's rule)",
                                    classes="setting-doc")
                    yield from field_row("verify", Input(placeholder="0.02", id="submit-verify",
                                                         classes="setting-input"),
                                         "fraction of units a second host re-runs to check (empty: cluster.verify)",
                                         "submit-verify")
                with Vertical(id="submit-gang-options", classes="submit-options"):   # a gang plugin's
                    yield from field_row("check every", Input(placeholder="2m", id="submit-check-every",
                                                              classes="setting-input"),
                                         "how often the members look for better hosts: 10s, 2m, 50supersteps, "
                                         "30s,50steps or off; add ,forced to restart on the best hosts at every "
                                         "check (empty: gang.check_interval and gang.check_supersteps)",
                                         "submit-check-every")
                yield Label("", id="submit-error", classes="setting-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Submit", id="submit", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    async def on_mount(self) -> None:
        await self._build_form()

    def on_resize(self) -> None:
        self.call_after_refresh(self._fit_form)

    def _fit_form(self) -> None:
        """The form gets the rows the screen leaves beside the title and the buttons (the CSS cannot subtract), so a
        plugin with many parameters scrolls between them on an 80x24 terminal instead of pushing them out of sight,
        and a short form leaves the dialog short."""
        dialog = self.query_one("#submit-dialog")
        others = sum(child.outer_size.height + child.styles.margin.top + child.styles.margin.bottom
                     for child in dialog.children if child.id != "submit-body")
        tallest = dialog.styles.max_height   # (`.dialog` in frost.tcss: a share of the screen)
        most = int(tallest.resolve(self.size, self.app.size)) if tallest is not None else self.size.height
        room = most - dialog.styles.gutter.height - others
        self.query_one("#submit-body").styles.max_height = max(room, MIN_FORM_ROWS)

    async def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "submit-plugin":
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
        gang = plugin is not None and plugin.gang
        self.query_one("#submit-unit-options").display = not gang   # a gang has members, not units to spread or check
        self.query_one("#submit-gang-options").display = gang
        container = self.query_one("#submit-params", Vertical)
        await container.remove_children()
        if plugin is None:
            return
        rows: list = []
        if plugin.description:
            rows.append(Label(plugin.description, classes="setting-doc"))
        for param in plugin.params:
            field_id = f"param-{param.name}"
            if param.kind == "bool":
                field: Any = Switch(value=bool(param.default), id=field_id)
            elif param.choices:
                field = Select([(str(c), c) for c in param.choices], value=param.default, allow_blank=False,
                               id=field_id)
            else:
                field = Input("" if param.default is None else str(param.default), id=field_id,
                              validators=[ParamValidator(param)], validate_on=["changed", "submitted"],
                              classes="setting-input")
            rows += field_row(param.name, field, param.help, field_id)
            if param.kind == "inputs":
                rows.append(Vertical(id=f"files-{param.name}", classes="input-files"))
        await container.mount_all(rows)
        for param in plugin.params:
            if param.kind == "inputs":
                await self._build_file_fields(param)

    async def _build_file_fields(self, param: ParamView) -> None:
        """A path field for each input file the parameter names, keeping the paths already typed."""
        for name, field_id in self._file_ids.items():
            fields = self.query(f"#{field_id}")
            if fields:
                self._paths[name] = fields.first(Input).value
        holder = self.query_one(f"#files-{param.name}", Vertical)
        await holder.remove_children()
        names = input_names(self.query_one(f"#param-{param.name}", Input).value)
        self._file_ids = {name: f"file-{param.name}-{i}" for i, name in enumerate(names)}
        rows: list = []
        for name, field_id in self._file_ids.items():
            machine = "this machine" if self._files_on is None else f"{self._files_on}'s machine"
            field = Input(self._paths.get(name, ""), placeholder=f"path of the file on {machine}", id=field_id,
                          classes="setting-input input-path")
            rows += field_row(f"  file {name}", field, f"the file units open as {name!r}", field_id)
        await holder.mount_all(rows)

    def collect(self) -> SubmitAssignment:
        """The command for the filled form; FieldError names the first field that is wrong."""
        plugin = self.selected_plugin()
        if plugin is None:
            raise FieldError("choose a plugin first")
        params: dict[str, Any] = {}
        inputs: dict[str, str] = {}
        for param in plugin.params:
            field_id = f"param-{param.name}"
            widget = self.query_one(f"#{field_id}")
            if isinstance(widget, (Switch, Select)):
                params[param.name] = widget.value
                continue
            try:
                params[param.name] = parse_param(param, widget.value)
            except ValueError as error:
                raise FieldError(str(error), field_id) from None
            if param.kind == "inputs":
                for name in input_names(params[param.name]):
                    file_id = self._file_ids.get(name, "")
                    fields = self.query(f"#{file_id}") if file_id else []
                    try:
                        inputs[name] = input_file(name, fields.first(Input).value if fields else "", self._files_on)
                    except ValueError as error:
                        raise FieldError(str(error), file_id if fields else field_id) from None
        if plugin.gang:
            seconds, supersteps, forced = check_cadence(self.query_one("#submit-check-every", Input).value)
            return SubmitAssignment(plugin=plugin.name, params=params, inputs=inputs, check_interval=seconds,
                                    check_supersteps=supersteps, check_forced=forced)
        one_per_host = self.query_one("#submit-one-per-host", Switch).value
        return SubmitAssignment(plugin=plugin.name, params=params, one_per_host=one_per_host, inputs=inputs,
                                verify=verify_fraction(self.query_one("#submit-verify", Input).value))

    async def on_input_changed(self, event: Input.Changed) -> None:
        field_id = event.input.id or ""
        if not field_id.startswith(("param-", "file-")):
            return
        errors = self.query(f"#{field_id}-error")
        if not errors:
            return  # the form was rebuilt for another plugin meanwhile
        result = event.validation_result
        self._show_error(field_id, "" if result is None or result.is_valid else "; ".join(result.failure_descriptions))
        plugin = self.selected_plugin()
        param = next((p for p in plugin.params if f"param-{p.name}" == field_id), None) if plugin else None
        if param is not None and param.kind == "inputs" and result is not None and result.is_valid:
            await self._build_file_fields(param)

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
        except FieldError as error:
            # Shown once: under the field it is about (which takes the cursor), else under the form.
            self._show_error(error.field_id or "submit", str(error))
            if error.field_id:
                self.query_one(f"#{error.field_id}").focus()
            return
        self.dismiss(command)

    def _show_error(self, field_id: str, message: str) -> None:
        label = self.query_one(f"#{field_id}-error", Label)
        label.update(message)
        label.set_class(bool(message), "-shown")

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
