"""The Events tab keeps the newest line in view, collapses repeats and opens any line in full."""

from __future__ import annotations

from frost_core import EventView
from frost_tui.shots.fixed import DEMO_NOW

from tests.tui.conftest import run_ui, screen_text
from tests.waiting import wait_in_app


def add_event(node, message: str, **fields) -> None:
    at = DEMO_NOW + 100 + len(node.snapshot().events)
    node.publish(events=node.snapshot().events + (EventView(at, fields.pop("kind", "join"), message, **fields),))


def test_the_newest_line_stays_in_view_until_the_owner_scrolls_down(node):
    async def scenario(app, pilot):
        await pilot.press("6")
        await pilot.pause()
        for n in range(40):  # more than a screen of them, one snapshot each
            add_event(node, f"peer-{n:02d} joined")
            await pilot.pause()
        await wait_in_app(pilot, lambda: "peer-39 joined" in screen_text(app))
        table = app.query_one("#events-table")
        assert table.cursor_row == 0
        await pilot.press("down", "down", "down")  # the owner reads older lines
        reading = table.selected_key()
        for n in range(40, 45):
            add_event(node, f"peer-{n:02d} joined")
            await pilot.pause()
        total = len(node.snapshot().events)
        await wait_in_app(pilot, lambda: table.border_subtitle == f"{total} of {total}")
        assert table.selected_key() == reading  # new lines did not take the cursor away

    run_ui(node, scenario, size=(80, 24))


def test_a_repeated_event_is_one_line_with_a_count(node):
    async def scenario(app, pilot):
        await pilot.press("6")
        for _ in range(12):
            add_event(node, "b7e1a2c9 refused the move: no room", kind="balance", severity="warning")
        add_event(node, "hopper joined")
        await wait_in_app(pilot, lambda: "×12" in screen_text(app))
        assert screen_text(app).count("refused the move") == 1

    run_ui(node, scenario)


def test_enter_opens_a_long_line_in_full(node):
    long = "step() raised MemoryError while rendering rows 480 to 511 " + "of a very wide picture " * 12 + "THE END"

    async def scenario(app, pilot):
        await pilot.press("6")
        add_event(node, long, kind="guest-log", severity="warning", title="Guest failed")  # no toast
        await wait_in_app(pilot, lambda: "step() raised MemoryError" in screen_text(app))
        assert "THE END" not in screen_text(app)  # the table cuts it at its edge
        await pilot.press("enter")
        await wait_in_app(pilot, lambda: "THE END" in screen_text(app))
        assert "Guest failed" in screen_text(app)
        await pilot.press("escape")
        await wait_in_app(pilot, lambda: "THE END" not in screen_text(app))

    run_ui(node, scenario, size=(80, 24))
