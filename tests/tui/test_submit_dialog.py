"""The submit dialog: input files for plugins that open them, --one-per-host, Tab, errors once and in words."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from textual.containers import VerticalScroll
from textual.widgets import Input, Select, Switch

from frost_core import ParamView, PluginView

from tests.tui.conftest import make_config, run_ui, screen_text
from tests.tui.fake_node import FakeNode
from tests.waiting import wait_in_app

GREP_VIEW = PluginView(
    name="grep", version="1.0", hash="ab" * 12, source="bundled", path="frost_plugins/grep.py", ok=True, error=None,
    description="Finds lines.", params=(
        ParamView("pattern", "str", "error", "text to look for", None, None, ()),
        ParamView("inputs", "inputs", "input", "names of the input files", None, None, ()),
    ),
)


def grep_node() -> FakeNode:
    """grep first, and no assignment yet: the dialog opens on the first plugin."""
    node = FakeNode()
    node.publish(plugins=(GREP_VIEW, *node.snapshot().plugins), assignments=())
    return node


def submitted(node: FakeNode) -> list:
    commands = []
    original = node.send_nowait

    def record(command) -> None:
        commands.append(command)
        original(command)

    node.send_nowait = record
    return commands


def test_a_path_field_per_named_input_file_and_one_per_host(tmp_path):
    node = grep_node()
    sent = submitted(node)
    (tmp_path / "a.log").write_text("x\n")
    (tmp_path / "b.log").write_text("y\n")

    async def scenario(app, pilot):
        await pilot.press("s")
        await wait_in_app(pilot, lambda: bool(app.screen.query("#file-inputs-0")))
        dialog = app.screen
        dialog.query_one("#param-inputs", Input).value = "a, b"
        # Mounted, not only listed: the fields are made anew when the names change (failed once in CI, 2026-11-28,
        # the click not submitting, whatever the dialog said then not recorded).
        await wait_in_app(pilot, lambda: [f.is_mounted for f in dialog.query(".input-path")] == [True, True])
        dialog.query_one("#file-inputs-0", Input).value = str(tmp_path / "a.log")
        dialog.query_one("#file-inputs-1", Input).value = str(tmp_path / "b.log")
        dialog.query_one("#submit-one-per-host", Switch).value = True
        await pilot.pause()   # laid out: a click lands where the button is drawn
        await pilot.click("#submit")
        try:
            await wait_in_app(pilot, lambda: bool(sent))
        except AssertionError:
            raise AssertionError(f"not submitted; the screen shows:\n{screen_text(app)}") from None

    run_ui(node, scenario)
    command, = sent
    assert command.plugin == "grep" and command.params["inputs"] == "a, b" and command.one_per_host
    assert command.inputs == {"a": str(tmp_path / "a.log"), "b": str(tmp_path / "b.log")}


def test_a_missing_input_file_is_said_once_under_its_field(tmp_path):
    node = grep_node()
    sent = submitted(node)

    async def scenario(app, pilot):
        await pilot.press("s")
        await wait_in_app(pilot, lambda: bool(app.screen.query("#file-inputs-0")))
        app.screen.query_one("#file-inputs-0", Input).value = str(tmp_path / "nowhere.log")
        await pilot.click("#submit")
        error = app.screen.query_one("#file-inputs-0-error")
        await wait_in_app(pilot, lambda: "nowhere.log does not exist" in str(error.render()))
        assert error.has_class("-shown") and not app.screen.query_one("#submit-error").has_class("-shown")
        assert app.screen.focused is app.screen.query_one("#file-inputs-0")

    run_ui(node, scenario)
    assert sent == []


def test_the_form_opens_on_the_plugin_of_the_owners_last_assignment_and_never_on_a_superseded_copy():
    """An owner running a sweep submits the same plugin again and again; the first in the list is only the default."""
    node = FakeNode()
    plugins = node.snapshot().plugins
    old_pi = dataclasses.replace(next(p for p in plugins if p.name == "montecarlo-pi"), hash="0f" * 32,
                                 params=(ParamView("darts", "int", 10, "", None, None, ()),), superseded_by="ab" * 32)
    node.publish(plugins=(*plugins, old_pi),
                 assignments=tuple(a for a in node.snapshot().assignments if a.plugin == "montecarlo-pi"))

    async def scenario(app, pilot):
        await pilot.press("s")
        await wait_in_app(pilot, lambda: bool(app.screen.query("#param-samples")))
        assert app.screen.query_one("#submit-plugin", Select).value == "montecarlo-pi"
        assert not app.screen.query("#param-darts")

    run_ui(node, scenario)


def test_a_wrong_number_is_said_once_in_words(node):
    async def scenario(app, pilot):
        await pilot.press("s")
        await wait_in_app(pilot, lambda: bool(app.screen.query("#param-width")))
        app.screen.query_one("#param-width", Input).value = "abc"
        await pilot.pause()
        await pilot.click("#submit")
        await pilot.pause()
        text = screen_text(app)
        assert "width must be a whole number, not 'abc'" in text
        assert text.count("must be a whole number") == 1  # under the field, not again under the form
        assert "is not a int" not in text

    run_ui(node, scenario)


def test_tab_only_lands_on_fields_the_owner_can_see(node):
    async def scenario(app, pilot):
        await pilot.press("s")
        await wait_in_app(pilot, lambda: bool(app.screen.query("#param-width")))
        for _ in range(12):
            await pilot.press("tab")
            focused = app.screen.focused
            assert focused is not None and not isinstance(focused, VerticalScroll), focused

    run_ui(node, scenario)


def test_grep_from_the_tui_finds_the_lines_of_the_chosen_file(tmp_path):
    """A real node runs the bundled grep on a file picked in the dialog."""
    log = tmp_path / "app.log"
    log.write_text("start\nerror: disk full\nok\nanother error\n")
    # Not about the owner: this machine runs other work, which `share` would rightly take for a busy owner.
    from frost_core.node.wiring import Node

    desk = Node(make_config(tmp_path, **{"owner.policy": "always"}))

    async def scenario(app, pilot):
        await wait_in_app(pilot, lambda: app.snapshot is not None
                          and any(p.name == "grep" and p.ok for p in app.snapshot.plugins), timeout=30)
        await pilot.press("s")
        await wait_in_app(pilot, lambda: "Submit an assignment" in screen_text(app))
        app.screen.query_one("#submit-plugin").value = "grep"
        await wait_in_app(pilot, lambda: bool(app.screen.query("#file-inputs-0")))
        app.screen.query_one("#file-inputs-0", Input).value = str(log)
        await pilot.click("#submit")
        await wait_in_app(pilot, lambda: len(app.snapshot.assignments) == 1, timeout=20)
        await wait_in_app(pilot, lambda: app.snapshot.assignments[0].state in ("done", "failed"), timeout=60)
        assignment = app.snapshot.assignments[0]
        assert assignment.state == "done", assignment.error
        report = json.loads(Path(assignment.result_path).read_text())
        assert (report["total_matches"], report["files"][0]["name"]) == (2, "input")

    run_ui(desk, scenario)


def test_the_verify_fraction_goes_with_the_assignment_and_a_wrong_one_is_said_under_its_field(node):
    sent = submitted(node)

    async def scenario(app, pilot):
        await pilot.press("s")
        await wait_in_app(pilot, lambda: bool(app.screen.query("#submit-verify")))
        dialog = app.screen
        dialog.query_one("#submit-verify", Input).value = "1.5"
        await pilot.click("#submit")
        await wait_in_app(pilot, lambda: "verify takes a fraction from 0 to 1" in screen_text(app))
        assert not sent
        dialog.query_one("#submit-verify", Input).value = "1"
        assert dialog.focused is dialog.query_one("#submit-verify", Input)   # the error took the cursor there
        await pilot.press("enter")   # and enter in a field submits, as in every form
        await wait_in_app(pilot, lambda: bool(sent))

    run_ui(node, scenario)
    command, = sent
    assert command.verify == 1.0


def test_a_plugin_with_many_parameters_keeps_the_buttons_in_view_on_80x24_and_its_fields_scroll_between():
    """The bundled grep's form (five fields, one per input file) pushed the Submit button below an 80x24 screen."""
    many = PluginView(name="sweep", version="1.0", hash="cd" * 12, source="bundled", path="frost_plugins/sweep.py",
                      ok=True, error=None, description="Many knobs.",
                      params=tuple(ParamView(f"knob{i}", "int", i, f"knob number {i}", 0, 100, ()) for i in range(8)))
    node = FakeNode()
    node.publish(plugins=(many,))
    sent = submitted(node)

    def on_screen(app, selector: str) -> bool:
        widget = app.screen.query_one(selector)
        return app.screen.region.contains_region(widget.region) and widget.region in widget.parent.region

    async def scenario(app, pilot):
        await pilot.press("s")
        await wait_in_app(pilot, lambda: bool(app.screen.query("#param-knob7")))
        await pilot.pause()
        assert on_screen(app, "#submit") and on_screen(app, "#cancel"), screen_text(app)
        assert not on_screen(app, "#submit-verify")   # below the fold, to be scrolled to
        app.screen.query_one("#submit-verify", Input).focus()
        await wait_in_app(pilot, lambda: on_screen(app, "#submit-verify") and on_screen(app, "#submit"))
        await pilot.click("#submit")
        await wait_in_app(pilot, lambda: bool(sent))

    run_ui(node, scenario, size=(80, 24))
    command, = sent
    assert command.params == {f"knob{i}": i for i in range(8)}


def test_a_gang_plugin_asks_how_often_its_members_check_not_one_per_host_or_verify():
    """A gang has p members, not units to spread one per host or re-run on a second host: its form offers the check
    cadence `submit --check-every` takes, says a wrong one under its field, and sends a right one with the gang."""
    heat = dataclasses.replace(GREP_VIEW, name="heat", gang=True, description="Members exchange edges.",
                               params=(ParamView("members", "int", 4, "members of the gang", 1, 64, ()),))
    node = FakeNode()
    node.publish(plugins=(heat, *node.snapshot().plugins), assignments=())
    sent = submitted(node)

    async def scenario(app, pilot):
        await pilot.press("s")
        await wait_in_app(pilot, lambda: bool(app.screen.query("#submit-check-every")))
        dialog = app.screen
        await wait_in_app(pilot, lambda: dialog.query_one("#submit-check-every").visible)
        shown = screen_text(app)
        assert "check every" in shown and "one per host" not in shown and "verify" not in shown, shown
        dialog.query_one("#submit-check-every", Input).value = "soon"
        await pilot.click("#submit")
        await wait_in_app(pilot, lambda: "check every 'soon': expected a time such as 10s" in screen_text(app))
        assert not sent
        dialog.query_one("#submit-check-every", Input).value = "30s,50steps"
        await pilot.press("enter")
        await wait_in_app(pilot, lambda: bool(sent))

    run_ui(node, scenario)
    command, = sent
    assert (command.plugin, command.check_interval, command.check_supersteps, command.check_forced) == (
        "heat", 30.0, 50, False)
