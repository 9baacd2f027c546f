"""What each tab shows in states worth checking: errors, a big cluster, results, saved settings."""

from __future__ import annotations

import dataclasses
import tomllib

from textual.widgets import Input, Select

from frost_core.api.snapshot import EventView
from frost_tui.shots.fixed import DEMO_NOW

from tests.tui.conftest import make_config, run_ui, screen_text
from tests.waiting import wait_in_app
from tests.tui.fake_node import FakeNode
from tests.png_reader import make_png


def test_an_error_event_becomes_a_titled_notification(node):
    async def scenario(app, pilot):
        node.publish(events=node.snapshot().events + (
            EventView(DEMO_NOW + 5, "error", "raytrace.py: step() took longer than 120 s", "error", "Guest stuck"),))
        await wait_in_app(pilot, lambda: "Guest stuck" in screen_text(app))
        assert "step() took longer than 120 s" in screen_text(app)
        assert "Traceback" not in screen_text(app)

    run_ui(node, scenario)


def test_a_failed_command_is_reported_not_raised(node):
    async def scenario(app, pilot):
        await pilot.press("l")
        await pilot.pause()
        await pilot.press(*"/etc/hostname", "enter")  # a file that is no plugin
        await wait_in_app(pilot, lambda: "Plugin error" in screen_text(app))

    run_ui(node, scenario)


def test_a_hundred_peers_and_ten_guests_fit_and_mark_suspects():
    async def scenario(app, pilot):
        await pilot.press("3")
        await pilot.pause()
        text = screen_text(app)
        assert "101 of 101" in text
        await pilot.press("slash", *"suspect", "enter")
        await pilot.pause()
        assert "? dijkstra" in screen_text(app)  # suspect peers are marked in the name column
        await pilot.press("2")
        await pilot.pause()
        assert screen_text(app).count("KiB") + screen_text(app).count("MiB") >= 10

    run_ui(FakeNode(peers=100, guests=10), scenario)


def test_paused_until_is_said_in_the_owners_words(node):
    async def scenario(app, pilot):
        node.publish(hosting=dataclasses.replace(node.snapshot().hosting, state="paused", paused_until=DEMO_NOW + 3600))
        # A snapshot the owner did not cause is drawn at the next passive redraw (within a second).
        await wait_in_app(pilot, lambda: "paused until 10:20" in screen_text(app), timeout=5)  # DEMO_NOW is 09:20 UTC

    run_ui(node, scenario)


def test_finished_image_result_is_previewed_and_saved(node, tmp_path):
    image = tmp_path / "render.png"
    image.write_bytes(make_png(64, 64))   # 16 rows tall at any width
    target = tmp_path / "saved.png"
    done = dataclasses.replace(
        node.snapshot().assignments[0], state="done", progress=1.0, result_media_type="image/png",
        result_filename="render.png", result_path=str(image), created_at=DEMO_NOW + 10,
    )
    node.publish(assignments=(done,))

    async def scenario(app, pilot):
        await pilot.press("4")
        await wait_in_app(pilot, lambda: "▀▀▀▀" in screen_text(app))
        assert "press w to save it" in screen_text(app)
        # The picture takes its share of a 30-row terminal (before: all 16 of its rows, the tables above it none; or
        # one row, when it was decoded after the layout), and the assignment and its units stay listed above it.
        await wait_in_app(pilot, lambda: screen_text(app).count("▀▀▀▀▀▀▀▀") >= 6)
        assert f"{done.id}  " in screen_text(app) and f"{done.units[0].task_id}  " in screen_text(app)
        await pilot.press("w")
        await pilot.pause()
        await pilot.press("end", "ctrl+u", *str(target), "enter")
        await wait_in_app(pilot, lambda: target.exists() and "Result saved" in screen_text(app))

    run_ui(node, scenario, size=(100, 30))
    assert target.read_bytes() == image.read_bytes()


def test_a_guest_without_a_checkpoint_has_all_its_work_at_risk_in_words(node):
    """Before: "38s CPU since the last checkpoint (0 B, 5m ago)", of a checkpoint never taken."""
    first, *others = node.snapshot().guests
    node.publish(guests=(dataclasses.replace(first, checkpoint_bytes=0), *others))

    async def scenario(app, pilot):
        await pilot.press("2")
        await wait_in_app(pilot, lambda: "5m00s CPU, all of it: no checkpoint yet" in screen_text(app))
        assert "0 B" not in screen_text(app)

    run_ui(node, scenario)


def test_a_done_assignment_names_its_units_output_files_and_where_the_node_keeps_them(node, tmp_path):
    """grep's result is a summary; the matching lines are files beside it, which the screen never mentioned."""
    folder = tmp_path / "results" / "f00dfeed-7"
    folder.mkdir(parents=True)
    for name in ("app.matches", "db.matches"):
        (folder / name).write_text("a needle\n")
    done = dataclasses.replace(node.snapshot().assignments[0], state="done", progress=1.0,
                               result_media_type="application/json", result_filename="grep.json",
                               result_path=str(tmp_path / "results" / "f00dfeed-7-grep.json"), files_folder=str(folder))
    node.publish(assignments=(done,))

    async def scenario(app, pilot):
        await pilot.press("4")
        await wait_in_app(pilot, lambda: f"2 output files of its units in {folder}: app.matches, db.matches"
                          in " ".join(screen_text(app).replace("│", " ").split()))

    run_ui(node, scenario)


def test_w_on_a_running_assignment_says_so_rather_than_to_select_one(node):
    """Before: "Select a finished assignment on the Assignments tab (4)", said on that tab with one selected."""
    async def scenario(app, pilot):
        await pilot.press("4", "w")
        await wait_in_app(pilot, lambda: "f00dfeed-7 is still running (63%, 2 of 6 units done)" in screen_text(app))

    run_ui(node, scenario)


def test_settings_are_validated_inline_and_saved_to_the_config_file(tmp_path):
    config = make_config(tmp_path)
    node = FakeNode(config)

    async def scenario(app, pilot):
        await pilot.press("7")
        await pilot.pause()
        app.query_one("#opt-guests-cpus").scroll_visible(animate=False, top=True)
        await pilot.pause()
        await pilot.click("#opt-guests-cpus")
        await pilot.press("end", "ctrl+u", *"x2")
        await pilot.pause()
        assert "guests.cpus must be a whole number" in screen_text(app)
        await pilot.press("ctrl+s")
        await wait_in_app(pilot, lambda: "Settings not saved" in screen_text(app))
        assert not config.paths.config_file.exists()
        await pilot.press("home", "delete")
        await pilot.pause()
        assert not app.query_one("#opt-guests-cpus-error").has_class("-shown")  # the inline error went away
        await pilot.press("ctrl+s")
        await wait_in_app(pilot, lambda: config.paths.config_file.exists())

    run_ui(node, scenario)
    saved = tomllib.loads(config.paths.config_file.read_text())
    assert saved["guests"]["cpus"] == 2


def test_settings_show_the_join_code(node):
    async def scenario(app, pilot):
        await pilot.press("7")
        await pilot.pause()
        app.query_one("#join-code").scroll_visible(animate=False)
        await pilot.pause()
        assert "frost1-7QX4-M2KD-9PLR-WE3T" in screen_text(app)

    run_ui(node, scenario)


def test_the_submit_form_keeps_what_was_typed_when_the_select_reports_its_value_late(node):
    """The plugin Select reports its first value after mounting; that must not wipe the form."""

    async def scenario(app, pilot):
        await pilot.press("s")
        await wait_in_app(pilot, lambda: bool(app.screen.query("#submit-params Input")))
        dialog = app.screen
        typed = dialog.query("#submit-params Input").first(Input)
        typed.value = "12345"
        select = dialog.query_one("#submit-plugin", Select)
        select.post_message(Select.Changed(select, select.value))
        await pilot.pause()
        await pilot.pause()
        assert dialog.query("#submit-params Input").first(Input) is typed and typed.value == "12345"

    run_ui(node, scenario)
