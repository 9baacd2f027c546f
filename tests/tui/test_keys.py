"""Keys in states a test cannot reach quickly with a real cluster (the rest: test_real_node.py).

The fake node here stands for a cluster of seven peers with distinct figures, a finished and
a running assignment of several units, and plugins with bounded parameters: starting that many
real nodes for each key would make the UI tests minutes long.
"""

from __future__ import annotations

from tests.tui.conftest import run_ui, screen_text










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




