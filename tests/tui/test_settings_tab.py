"""The Settings tab edits every option of core's table, each with its range and meaning, at 80×24 too."""

from __future__ import annotations

import tomllib

from textual.widgets import Select

from frost_core import OPTIONS

from tests.tui.conftest import make_config, run_ui, screen_text
from tests.waiting import wait_in_app
from tests.tui.fake_node import FakeNode


def test_every_option_of_the_table_has_a_field_with_its_meaning(node):
    async def scenario(app, pilot):
        await pilot.press("7")
        await pilot.pause()
        pane = app.query_one("#settings-pane")
        for option in OPTIONS:
            field_id = "opt-" + option.name.replace(".", "-").replace("_", "-")
            assert pane.query(f"#{field_id}"), f"no field for {option.name}"
        docs = {str(label.render()) for label in pane.query(".setting-doc")}
        assert all(option.doc in docs for option in OPTIONS)

    run_ui(node, scenario)


def test_the_evict_hold_reads_whole_at_80x24_and_saves(tmp_path):
    config = make_config(tmp_path)
    node = FakeNode(config)

    async def scenario(app, pilot):
        await pilot.press("7")
        await pilot.pause()
        field = app.query_one("#opt-owner-evict-hold")
        field.scroll_visible(animate=False, top=True)
        await wait_in_app(pilot, lambda: "owner.evict_hold" in screen_text(app))
        text = screen_text(app)
        assert "a number from 0 to 86400" in text
        # The meaning gets the width of the screen, not a 15-column strip beside the field.
        assert "Seconds after an eviction by the owner policy during which this machine" in text
        await pilot.click("#opt-owner-evict-hold")
        await pilot.press("end", "ctrl+u", *"45")
        await pilot.press("ctrl+s")
        await wait_in_app(pilot, lambda: config.paths.config_file.exists())

    run_ui(node, scenario, size=(80, 24))
    assert tomllib.loads(config.paths.config_file.read_text())["owner"]["evict_hold"] == 45.0


def test_choices_lists_and_tables_are_edited_in_their_own_terms(tmp_path):
    config = make_config(tmp_path)
    node = FakeNode(config)

    async def scenario(app, pilot):
        await pilot.press("7")
        await pilot.pause()
        app.query_one("#opt-owner-policy", Select).value = "idle-only"
        app.query_one("#opt-desk-programs").value = "steam, zoom"
        app.query_one("#opt-desk-schedule").value = '{"Mon-Fri 09:00-17:00" = "idle-only"}'
        await pilot.pause()
        app.query_one("#opt-desk-max-temperature").value = "abc"
        await pilot.pause()
        error = app.query_one("#opt-desk-max-temperature-error")
        assert error.has_class("-shown") and "desk.max_temperature must be a number, not 'abc'" in str(error.render())
        app.query_one("#opt-desk-max-temperature").value = "85"
        await pilot.press("ctrl+s")
        await wait_in_app(pilot, lambda: config.paths.config_file.exists())

    run_ui(node, scenario)
    saved = tomllib.loads(config.paths.config_file.read_text())
    assert saved["owner"]["policy"] == "idle-only"
    assert saved["desk"]["programs"] == ["steam", "zoom"]
    assert saved["desk"]["schedule"] == {"Mon-Fri 09:00-17:00": "idle-only"}
    assert saved["desk"]["max_temperature"] == 85.0


def test_the_form_built_on_first_showing_holds_the_nodes_values_and_ctrl_s_before_it_saves_nothing(node):
    """The form is made when Settings is first shown (bench/ui_startup.py): ctrl+s before that has nothing to
    save, and the fields hold the values of the node's newest snapshot, also one that came while it was made."""
    async def scenario(app, pilot):
        node.publish(settings={**node.snapshot().settings, "owner.evict_hold": 1234.0, "owner.policy": "idle-only"})
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_in_app(pilot, lambda: "Nothing changed." in screen_text(app))
        await pilot.press("7")
        await wait_in_app(pilot, lambda: app.query("#opt-owner-evict-hold"))
        await wait_in_app(pilot, lambda: app.query_one("#opt-owner-evict-hold").value == "1234")
        assert app.query_one("#opt-owner-policy", Select).value == "idle-only"
        await pilot.press("ctrl+s")
        await wait_in_app(pilot, lambda: screen_text(app).count("Nothing changed.") == 2)

    run_ui(node, scenario)


def test_on_the_settings_tab_the_page_keys_scroll_the_form_tab_reaches_its_fields_and_digits_switch_tabs(node):
    """The keyboard rests on the form's keys (settings.FormKeys), not on the form: its focus would restyle the
    form's 435 widgets at every switch to the tab and away."""
    async def scenario(app, pilot):
        await pilot.press("7")
        await wait_in_app(pilot, lambda: app.query("#opt-owner-evict-hold"))
        form = app.query_one("#settings-form")
        await pilot.pause()
        assert form.max_scroll_y > 0, "the form fits the screen: scrolling shows nothing"
        await pilot.press("pagedown", "down")
        await wait_in_app(pilot, lambda: form.scroll_y > 0)
        await pilot.press("end")
        await wait_in_app(pilot, lambda: form.scroll_y == form.max_scroll_y)
        await pilot.press("home")
        await wait_in_app(pilot, lambda: form.scroll_y == 0)
        assert not form.has_focus and form not in app.focused.ancestors_with_self
        await pilot.press("tab")
        await pilot.pause()
        first_field = next(w for w in form.query("Switch, Input, Select") if w.focusable)
        assert app.focused is first_field
        await pilot.press("shift+tab", "2")
        await wait_in_app(pilot, lambda: app.query_one("TabbedContent").active == "guests")

    run_ui(node, scenario, size=(80, 24))


def test_saving_an_option_read_only_at_start_says_it_waits_for_a_restart(tmp_path):
    config = make_config(tmp_path)
    node = FakeNode(config)

    async def scenario(app, pilot):
        await pilot.press("7")
        await pilot.pause()
        app.query_one("#opt-node-port").value = "47799"
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_in_app(pilot, lambda: "Waits for a restart: node.port takes effect when the node" in screen_text(app))

    run_ui(node, scenario)
    assert tomllib.loads(config.paths.config_file.read_text())["node"]["port"] == 47799
