"""Plugins: `l` takes a file or a folder, `r` removes one the owner added, errors name the author's file."""

from __future__ import annotations

from pathlib import Path

from frost_core.node.wiring import Node

from tests.plugin_sources import good_source, write
from tests.tui.conftest import make_config, run_ui, screen_text
from tests.waiting import wait_in_app

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"


async def press_r_on(app, pilot, row: str) -> None:
    """Put the Plugins table's cursor on the row whose key starts with `row` ("added:wonky:"), press r."""
    table = app.query_one("#plugins-table")
    await wait_in_app(pilot, lambda: any(k.startswith(row) for k in table._keys))
    table.select_key(next(k for k in table._keys if k.startswith(row)))
    await pilot.pause()
    await pilot.press("r")


def test_l_takes_a_folder_and_r_removes_a_broken_plugin_for_good(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # short relative paths: typing is slow in a test
    folder = tmp_path / "julia"
    folder.mkdir()
    (folder / "__init__.py").write_text(
        (PLUGINS / "mandelbrot.py").read_text().replace('name = "mandelbrot"', 'name = "julia"'))
    (tmp_path / "wonky.py").write_text("plugin = object()\n")
    config = make_config(tmp_path)

    async def scenario(app, pilot):
        await wait_in_app(pilot, lambda: app.snapshot is not None and app.snapshot.plugins, timeout=30)
        await pilot.press("l")
        await pilot.press(*"julia", "enter")
        await wait_in_app(pilot, lambda: any(p.name == "julia" and p.ok for p in app.snapshot.plugins), timeout=30)
        await pilot.press("l")
        await pilot.press(*"wonky.py", "enter")
        await wait_in_app(pilot, lambda: any(p.name == "wonky" and not p.ok for p in app.snapshot.plugins), timeout=30)
        wonky = next(p for p in app.snapshot.plugins if p.name == "wonky")
        # The author edits wonky.py where it is, not the node's copy of it in the data dir.
        assert wonky.path == str(tmp_path / "wonky.py") and wonky.error.startswith("wonky.py:")
        assert str(config.paths.data_dir) not in wonky.error
        await press_r_on(app, pilot, "added:wonky:")
        await wait_in_app(pilot, lambda: "Remove wonky?" in screen_text(app))
        await pilot.press("y")
        await wait_in_app(pilot, lambda: all(p.name != "wonky" for p in app.snapshot.plugins), timeout=30)

    run_ui(Node(config), scenario)

    async def restarted(app, pilot):
        await wait_in_app(pilot, lambda: app.snapshot is not None and any(p.name == "julia" for p in app.snapshot.plugins),
                          timeout=30)
        assert all(p.name != "wonky" for p in app.snapshot.plugins)  # no warning at the next start

    run_ui(Node(config), restarted)


def test_a_plugin_edited_and_loaded_again_lists_both_copies_and_says_which_one_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # short relative paths: typing is slow in a test
    source = write(tmp_path / "sq.py", good_source(version="1.0"))

    async def scenario(app, pilot):
        await wait_in_app(pilot, lambda: app.snapshot is not None and app.snapshot.plugins, timeout=30)
        await pilot.press("5", "l", *"sq.py", "enter")
        await wait_in_app(pilot, lambda: any(p.name == "squares" for p in app.snapshot.plugins), timeout=30)
        source.write_text(good_source(version="1.1"))
        await pilot.press("l", *"sq.py", "enter")
        await wait_in_app(pilot, lambda: sum(p.name == "squares" for p in app.snapshot.plugins) == 2, timeout=30)
        runs = next(p for p in app.snapshot.plugins if p.version == "1.1")
        await wait_in_app(pilot, lambda: f"superseded by {runs.hash[:12]}" in screen_text(app))
        rows = [line for line in screen_text(app).splitlines() if "squares" in line]
        assert [("1.0" in row, "superseded" in row) for row in rows] == [(True, True), (False, False)], rows
        await press_r_on(app, pilot, "added:squares:")
        await wait_in_app(pilot, lambda: "Every copy of squares (2) is forgotten" in screen_text(app))

    run_ui(Node(make_config(tmp_path)), scenario)


def test_a_bundled_plugin_shows_no_install_path_and_is_not_removed(tmp_path):
    async def scenario(app, pilot):
        await wait_in_app(pilot, lambda: app.snapshot is not None and app.snapshot.plugins, timeout=30)
        grep = next(p for p in app.snapshot.plugins if p.name == "grep")
        assert grep.path == "frost_plugins/grep.py"
        await pilot.press("5")
        await press_r_on(app, pilot, "bundled:grep:")
        await wait_in_app(pilot, lambda: "Cannot remove" in screen_text(app))
        assert "/" + "frost_plugins" not in screen_text(app) and str(PLUGINS) not in screen_text(app)

    run_ui(Node(make_config(tmp_path)), scenario)


def test_r_asks_first_and_escape_keeps_the_plugin(node):
    async def scenario(app, pilot):
        await pilot.press("5")
        await press_r_on(app, pilot, "added:fluid:")
        await wait_in_app(pilot, lambda: "Remove fluid?" in screen_text(app))
        await pilot.press("escape")
        await pilot.pause()
        assert any(p.name == "fluid" for p in app.snapshot.plugins)
        await pilot.press("r", "y")
        await wait_in_app(pilot, lambda: all(p.name != "fluid" for p in app.snapshot.plugins))

    run_ui(node, scenario)


def test_a_plugin_folder_that_cannot_be_copied_is_an_error_naming_it_and_the_node_goes_on(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # short relative paths: typing is slow in a test
    broken = tmp_path / "linked"
    broken.mkdir()
    (broken / "__init__.py").write_text((PLUGINS / "mandelbrot.py").read_text().replace('"mandelbrot"', '"linked"'))
    (broken / "tables.py").symlink_to(tmp_path / "gone.py")  # a link to a file that is not there (root reads all)

    async def scenario(app, pilot):
        await wait_in_app(pilot, lambda: app.snapshot is not None and app.snapshot.plugins, timeout=30)
        await pilot.press("l")
        await pilot.press(*"linked", "enter")
        await wait_in_app(pilot, lambda: any("linked: cannot be copied into the data dir" in e.message
                                             for e in app.snapshot.events), timeout=30)
        assert all(p.name != "linked" for p in app.snapshot.plugins)
        # The node goes on: the next plugin loads.
        (broken / "tables.py").unlink()
        await pilot.press("l")
        await pilot.press(*"linked", "enter")
        await wait_in_app(pilot, lambda: any(p.name == "linked" and p.ok for p in app.snapshot.plugins), timeout=30)

    run_ui(Node(make_config(tmp_path)), scenario)
