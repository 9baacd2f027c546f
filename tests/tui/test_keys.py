"""Every single-key command, pressed as the owner would, judged by what the screen shows next."""

from __future__ import annotations

from frost_tui.app import TABS

from .conftest import run_ui, screen_text
from .fake_node import FakeNode


def test_p_pauses_and_resumes(node):
    async def scenario(app, pilot):
        await pilot.press("p")
        await pilot.pause()
        assert "P A U S E D" in screen_text(app)
        assert "paused until you resume" in screen_text(app)
        await pilot.press("p")
        await pilot.pause()
        assert "H O S T I N G" in screen_text(app)

    run_ui(node, scenario)


def test_e_evicts_every_guest_at_once_without_asking(node):
    async def scenario(app, pilot):
        await pilot.press("2")
        assert "b7e1a2c9-4.0" in screen_text(app)
        await pilot.press("e")
        await pilot.pause()
        text = screen_text(app)
        assert "No guests" in text and "b7e1a2c9-4.0" not in text
        assert len(app.screen_stack) == 1  # no confirmation dialog

    run_ui(node, scenario)


def test_x_evicts_only_the_selected_guest(node):
    async def scenario(app, pilot):
        await pilot.press("2", "down", "x")
        await pilot.pause()
        text = screen_text(app)
        assert "a91f3d20-5.1" not in text
        assert "b7e1a2c9-4.0" in text and "b7e1a2c9-4.2" in text

    run_ui(node, scenario)


def test_x_without_guests_says_what_to_do():
    async def scenario(app, pilot):
        await pilot.press("x")
        await pilot.pause()
        assert "No guest selected" in screen_text(app)

    run_ui(FakeNode(guests=0), scenario)


def test_f_finishes_then_pauses(node):
    async def scenario(app, pilot):
        await pilot.press("f")
        await pilot.pause()
        text = screen_text(app)
        assert "F I N I S H I N G" in text and "then pausing" in text

    run_ui(node, scenario)


def test_number_keys_switch_tabs(node):
    expected = {"1": "Transfer mode", "2": "Work at risk", "3": "Last heard", "4": "Runs on",
                "5": "Hash", "6": "Severity", "7": "guests.cpus"}

    async def scenario(app, pilot):
        for key in "2345671":
            await pilot.press(key)
            await pilot.pause()
            assert app.query_one("TabbedContent").active == TABS[int(key) - 1][0]
            assert expected[key] in screen_text(app)

    run_ui(node, scenario)


def test_slash_filters_peers(node):
    async def scenario(app, pilot):
        await pilot.press("3", "slash", *"dij")
        await pilot.pause()
        text = screen_text(app)
        assert "dijkstra" in text and "babbage" not in text
        assert "1 of 7" in text

    run_ui(node, scenario)


def test_slash_filters_events(node):
    async def scenario(app, pilot):
        await pilot.press("6", "slash", *"error")
        await pilot.pause()
        text = screen_text(app)
        assert "fluid.py" in text and "hopper joined" not in text

    run_ui(node, scenario)


def test_o_and_header_clicks_sort_peers(node):
    async def scenario(app, pilot):
        await pilot.press("3")
        await pilot.pause()
        assert "sorted by Available" in screen_text(app)
        await pilot.press("o")
        await pilot.pause()
        assert "sorted by CPUs" in screen_text(app)
        await pilot.click("#peers-table", offset=(3, 1))  # the Name header
        await pilot.pause()
        text = screen_text(app)
        assert "sorted by Name" in text
        assert text.index("ada ") < text.index("babbage") < text.index("curie")

    run_ui(node, scenario)


def test_s_submits_with_inline_validation(node):
    async def scenario(app, pilot):
        await pilot.press("s")
        await pilot.pause()
        assert "Submit an assignment" in screen_text(app)
        await pilot.click("#param-width")
        await pilot.press("end", "ctrl+u", *"9999")  # above the plugin's maximum of 4096
        await pilot.pause()
        assert "width must be at most 4096" in screen_text(app)
        await pilot.press("enter")
        await pilot.pause()
        assert "Submit an assignment" in screen_text(app)  # refused: still open
        await pilot.press("backspace", "backspace", "backspace", "enter")  # width 9
        await pilot.pause()
        assert "width must be at least 16" in screen_text(app)
        await pilot.press(*"00", "enter")  # width 900
        await pilot.pause()
        text = screen_text(app)
        assert "Submit an assignment" not in text
        assert "f00dfeed-12" in text  # the new assignment, on the Assignments tab
        assert "width=900" in text

    run_ui(node, scenario)


def test_l_loads_a_plugin_and_refuses_a_missing_file(node, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # short relative paths: typing is slow in a test
    plugin = tmp_path / "wave.py"
    plugin.write_text("def step(state):\n    return state\n")

    async def scenario(app, pilot):
        await pilot.press("l")
        await pilot.pause()
        await pilot.press(*"nope.py", "enter")
        await pilot.pause()
        assert "Not a file:" in screen_text(app)
        await pilot.press("end", "ctrl+u", *"wave.py", "enter")
        await pilot.pause()
        text = screen_text(app)
        assert "wave" in text and "added" in text

    run_ui(node, scenario)


def test_m_moves_the_selected_unit_to_a_chosen_peer(node):
    async def scenario(app, pilot):
        await pilot.press("4")
        await pilot.click("#units-table", offset=(3, 3))  # f00dfeed-7.1, running on ada
        await pilot.press("m")
        await pilot.pause()
        assert "Move f00dfeed-7.1 to" in screen_text(app)
        await pilot.press("down", "enter")  # the second live peer offered
        await pilot.pause()
        row = next(line for line in screen_text(app).splitlines() if "f00dfeed-7.1" in line)
        assert " 2 " in row  # moves went from 1 to 2
        assert "ada" not in row

    run_ui(node, scenario)


def test_q_with_guests_asks_and_keeps_them_checkpointed(node):
    async def scenario(app, pilot):
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("escape")  # changed my mind
        await pilot.pause()
        assert "Evict first" not in screen_text(app)
        await pilot.press("q")
        await pilot.pause()
        assert "Evict first" in screen_text(app)
        await pilot.press("k")

    app = run_ui(node, scenario)
    assert app.return_code == 0
    assert node.stopped_cleanly


def test_q_evict_first_quits_once_guests_are_gone(node):
    async def scenario(app, pilot):
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()

    app = run_ui(node, scenario)
    assert app.return_code == 0
    assert node.snapshot().guests == ()


def test_footer_and_question_mark_show_the_keys(node):
    async def scenario(app, pilot):
        footer = screen_text(app).splitlines()[-1]
        for label in ("Pause/resume", "Evict all", "Submit", "Quit", "Help"):
            assert label in footer
        await pilot.press("question_mark")
        await pilot.pause()
        text = screen_text(app)
        for words in ("pause hosting", "evict every guest", "finish the current guests", "submit an assignment",
                      "load a plugin", "move the selected unit", "filter", "quit"):
            assert words in text
        await pilot.press("escape")
        await pilot.pause()
        assert "frost-tui keys" not in screen_text(app)

    run_ui(node, scenario)


def test_command_palette_offers_the_commands(node):
    async def scenario(app, pilot):
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"evict all")
        await pilot.pause(0.3)
        assert "Evict all guests (e)" in screen_text(app)
        await pilot.press("enter")
        await pilot.pause()
        assert node.snapshot().guests == ()

    run_ui(node, scenario)
