"""Keys in states a test cannot reach quickly with a real cluster (the rest: test_real_node.py).

The fake node here stands for a cluster of seven peers with distinct figures, a finished and
a running assignment of several units, and plugins with bounded parameters: starting that many
real nodes for each key would make the UI tests minutes long.
"""

from __future__ import annotations

import dataclasses
import json
import re

from textual import events
from textual.widgets import Input, TabbedContent, Tabs

from textual.widgets._footer import FooterKey

from frost_tui.tabs.peers import PeersPane
from frost_tui.widgets.footer import KeysFooter

from tests.tui.conftest import run_ui, screen_text
from frost_tui.shots.fixed import DEMO_NOW, demo_snapshot
from tests.tui.fake_node import FakeNode
from tests.waiting import wait_in_app

TAB_IDS = ("machine", "guests", "peers", "assignments", "plugins", "events", "settings")


def test_every_tab_key_works_from_every_tab(node):
    missed = []
    # From every tab to This machine (no table: the case that failed) and back, then between the
    # tabs with tables and fields; the tmux test in tests/e2e goes through all 42 moves.
    presses = "1213141516171" + "3462573"

    async def scenario(app, pilot):
        for before, key in zip(presses, presses[1:]):
            await pilot.press(key)
            await pilot.pause()
            if app.query_one(TabbedContent).active != TAB_IDS[int(key) - 1]:
                missed.append(f"{before}→{key}")

    run_ui(node, scenario)
    assert missed == []  # on the old code the hidden Peers table kept the focus and pulled its tab back


def test_a_tab_change_handled_once_the_tabs_are_gone_does_not_stop_the_app(node):
    # A tab chosen just before the quit (a submit's answer shows the Assignments tab) is handled after the
    # closing app took its tabs off the screen: the handler's look for the tabs stopped the app with an
    # error (a CI run, 2026-11-28, in the submit dialog's test). The same order, made at once here:
    async def scenario(app, pilot):
        tabs = app.query_one(TabbedContent)
        late = TabbedContent.TabActivated(tabs, tabs.query_one(Tabs).active_tab)
        await tabs.remove()
        app.post_message(late)
        await pilot.pause()

    run_ui(node, scenario)   # raises the app's error, if it had one


def test_digits_in_a_field_are_text_until_escape_leaves_it(node):
    async def scenario(app, pilot):
        await pilot.press("7")
        field = app.query_one("#settings-pane").query(Input).first()
        field.focus()  # the owner tabbed or clicked into a Settings field
        await pilot.pause()
        await pilot.press("end", "2")
        await pilot.pause()
        assert field.value.endswith("2")  # a digit typed into a field is text, as in k9s
        assert app.query_one(TabbedContent).active == "settings"
        await pilot.press("escape", "1")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "machine"

    run_ui(node, scenario)


def burst(app, keys: str) -> None:
    """`keys` as a terminal hands them over in one read (typed fast, or pasted): all queued before the first is
    handled. (Pilot's press waits for each key to be handled before it sends the next.)"""
    names = {"/": "slash", " ": "space"}
    for key in keys:
        app.post_message(events.Key(names.get(key, key), key))


def test_words_typed_in_the_burst_that_opens_a_filter_or_the_find_dialog_land_in_it(node):
    """The app gives a key to the widget with the keyboard when the key comes: the words after "/" went to the table,
    which the field "/" opened had not yet taken from, and were lost (on the Assignments tab "c" is cancel)."""
    async def scenario(app, pilot):
        await pilot.press("3")
        await pilot.pause()
        burst(app, "/ada")
        await wait_in_app(pilot, lambda: "1 of 7" in screen_text(app))
        assert app.query_one("#peers-filter", Input).value == "ada"
        await pilot.press("escape")
        await pilot.pause()

        sweep = node.snapshot().assignments[0]
        await pilot.press("4")
        app.query_one("AssignmentsPane").select_assignment(sweep.id)
        await pilot.pause()
        burst(app, "/12 failed")
        await wait_in_app(pilot, lambda: app.screen.query("#find-input"))
        await pilot.pause()
        assert app.screen.query_one("#find-input", Input).value == "12 failed"
        assert app.query_one(TabbedContent).active == "assignments"
        await pilot.press("x")   # typed once the dialog has the keyboard: once
        assert app.screen.query_one("#find-input", Input).value == "12 failedx"

    run_ui(node, scenario)


def test_escape_clears_and_leaves_the_filter(node):
    async def scenario(app, pilot):
        await pilot.press("3", "slash", *"ada")
        await pilot.pause()
        assert "1 of 7" in screen_text(app)
        assert "esc Back" in screen_text(app).splitlines()[-1]  # the footer says how to leave
        await pilot.press("escape")
        await pilot.pause()
        assert "7 of 7" in screen_text(app)  # cleared, not left applied unseen
        assert app.query_one("#peers-filter", Input).value == ""
        await pilot.press("6", "3")  # and the keys work again at once
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "peers"
        assert "7 of 7" in screen_text(app)
        await pilot.press("question_mark")
        await pilot.pause()
        assert "frost-tui keys" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert "frost-tui keys" not in screen_text(app)

    run_ui(node, scenario)


def test_a_submit_from_any_tab_shows_the_new_assignment_selected(node):
    async def scenario(app, pilot):
        await pilot.press("3", "s")
        await pilot.pause()
        await pilot.click("#param-width")
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "assignments"
        assert app.query_one("AssignmentsPane").selected_assignment().id == "f00dfeed-12"

    run_ui(node, scenario)


def test_o_and_header_clicks_sort_peers_showing_column_and_direction(node):
    async def scenario(app, pilot):
        await pilot.press("3")
        await pilot.pause()
        assert "sorted by Available, descending" in screen_text(app)
        assert "Available ▼" in screen_text(app)
        await pilot.press("o")
        await pilot.pause()
        assert "sorted by CPUs, descending" in screen_text(app)
        assert "CPUs ▼" in screen_text(app) and "Available ▼" not in screen_text(app)
        await pilot.click("#peers-table", offset=(3, 1))  # the Name header
        await pilot.pause()
        text = screen_text(app)
        assert "sorted by Name, ascending" in text and "Name ▲" in text
        assert text.index("ada ") < text.index("babbage") < text.index("curie")
        await pilot.click("#peers-table", offset=(3, 1))  # again: the other way round
        await pilot.pause()
        text = screen_text(app)
        assert "sorted by Name, descending" in text and "Name ▼" in text
        assert text.index("curie") < text.index("babbage") < text.index("ada ")

    run_ui(node, scenario)


def test_a_peers_last_minute_shows_what_it_offered_every_six_seconds(node):
    async def scenario(app, pilot):
        await pilot.press("3")
        await pilot.pause()
        pane = app.query_one(PeersPane)
        shown = demo_snapshot()
        peer = next(p for p in shown.peers if not p.is_self and p.state == "alive")   # idle extremity 0.9
        first = (DEMO_NOW // 6 + 1) * 6
        for step, available in enumerate((0.0, 0.45, 0.9, 0.9, 0.2)):
            early = tuple(dataclasses.replace(p, available=0.9 - available) if p is peer else p for p in shown.peers)
            pane.show(dataclasses.replace(shown, peers=early), first + 6 * step + 1)
            offered = tuple(dataclasses.replace(p, available=available) if p is peer else p for p in shown.peers)
            pane.show(dataclasses.replace(shown, peers=offered), first + 6 * step + 4)   # the step's latest counts
        await pilot.pause()
        row = next(line for line in screen_text(app).splitlines() if f" {peer.name} " in line)
        assert "▁▅██▃" in row, row     # 0.2 of 0.9: the third of seven steps up
        back = tuple(dataclasses.replace(p, available=0.9) if p is peer else p for p in shown.peers)
        pane.show(dataclasses.replace(shown, peers=back), first + 6 * 8 + 1)     # three steps on another tab
        await pilot.pause()
        row = next(line for line in screen_text(app).splitlines() if f" {peer.name} " in line)
        assert "▁▅██▃   █" in row, row  # the steps nobody looked at are blank, not squeezed out

    run_ui(node, scenario)


def test_the_peers_sort_the_owner_chose_is_the_one_the_next_run_starts_with(tmp_path):
    choices = tmp_path / "ui.json"

    async def sort_by_name_the_other_way(app, pilot):
        await pilot.press("3")
        await pilot.pause()
        for _ in range(2):
            await pilot.click("#peers-table", offset=(3, 1))  # the Name header: ascending, then descending
            await pilot.pause()
        assert "sorted by Name, descending" in screen_text(app)

    async def peers_as_left(app, pilot):
        await pilot.press("3")
        await pilot.pause()
        text = screen_text(app)
        assert "sorted by Name, descending" in text and text.index("curie") < text.index("ada ")

    async def peers_by_default(app, pilot):
        await pilot.press("3")
        await pilot.pause()
        assert "sorted by Available, descending" in screen_text(app)

    run_ui(FakeNode(), sort_by_name_the_other_way, choices_file=choices)
    run_ui(FakeNode(), peers_as_left, choices_file=choices)
    choices.write_text('{"peers_sort": "Name", "peers_descending": "yes"')   # torn, or edited by hand
    run_ui(FakeNode(), peers_by_default, choices_file=choices)               # the defaults, no failure


def test_v_hides_a_peers_column_the_owner_does_not_want_and_the_next_run_keeps_it_hidden(tmp_path):
    choices = tmp_path / "ui.json"

    def header(app) -> str:
        return next(line for line in screen_text(app).splitlines() if "Name" in line and "State" in line)

    async def hide_the_address(app, pilot):
        await pilot.press("3")
        await pilot.pause()
        assert "Address" in header(app) and "Free memory" in header(app)
        await pilot.press("v")
        await pilot.pause()
        assert "Columns of Peers" in screen_text(app)
        await pilot.press("space", "escape")      # the first a window may drop: Address
        await pilot.pause()
        assert "Address" not in header(app) and "Free memory" in header(app)
        assert "1 hidden (v)" in screen_text(app)

    async def still_hidden(app, pilot):
        await pilot.press("3")
        await pilot.pause()
        assert "Address" not in header(app) and "RTT" in header(app)
        await pilot.press("v")
        await pilot.pause()
        await pilot.press("space", "escape")      # shown again
        await pilot.pause()
        assert "Address" in header(app)

    run_ui(FakeNode(), hide_the_address, choices_file=choices)
    run_ui(FakeNode(), still_hidden, choices_file=choices)
    assert json.loads(choices.read_text())["hidden_columns"] == {"peers-table": []}


def test_t_shows_the_guests_as_a_tree_of_assignments_with_their_totals_folded_by_key_and_kept(tmp_path):
    choices = tmp_path / "ui.json"

    def rows(app) -> list[str]:
        """The table's lines, each starting with its first cell's id (an assignment's: its tree row)."""
        found = (re.match(r"\s*│\s*(?:[▾▸] )?\s*([0-9a-f]{8}-\d+(?:\.\d+)?) (.*)", line)
                 for line in screen_text(app).splitlines())
        return [" ".join(match.groups()) for match in found if match]

    async def tree(app, pilot):
        await pilot.press("2", "t")
        await pilot.pause()
        assert "by assignment: 2 assignments" in screen_text(app)
        first, *_ = listed = rows(app)
        # b7e1a2c9-4's two guests: 300 + 642 CPU-seconds, 60 + 110 MiB, both running.
        assert "▾ b7e1a2c9-4" in screen_text(app) and "▸" not in screen_text(app)
        assert "2 guests" in first and "15m42s" in first and "170 MiB" in first and "2 running" in first
        assert [line.split()[0] for line in listed] == ["b7e1a2c9-4", "b7e1a2c9-4.0", "b7e1a2c9-4.2", "a91f3d20-5",
                                                         "a91f3d20-5.1"]
        await pilot.press("up", "enter")   # from the guest the flat list had selected to its assignment's row
        await pilot.pause()
        assert "Assignment b7e1a2c9-4 here" in screen_text(app) and "2 guests here" in screen_text(app)
        await pilot.press("escape", "minus")   # fold the selected assignment
        await pilot.pause()
        assert [line.split()[0] for line in rows(app)] == ["b7e1a2c9-4", "a91f3d20-5", "a91f3d20-5.1"]
        await pilot.press("x")   # a fold is no guest to evict
        await pilot.pause()
        assert "No guest selected" in screen_text(app)
        await pilot.press("asterisk")   # fold them all
        await pilot.pause()
        assert [line.split()[0] for line in rows(app)] == ["b7e1a2c9-4", "a91f3d20-5"]
        await pilot.press("asterisk")   # all folded: unfold them all
        await pilot.pause()
        assert len(rows(app)) == 5

    async def still_a_tree(app, pilot):
        await pilot.press("2")
        await pilot.pause()
        assert "▾ b7e1a2c9-4" in screen_text(app)
        await pilot.press("t")   # and back to the flat list
        await pilot.pause()
        assert [line.split()[0] for line in rows(app)] == ["b7e1a2c9-4.0", "a91f3d20-5.1", "b7e1a2c9-4.2"]

    run_ui(FakeNode(), tree, choices_file=choices)
    run_ui(FakeNode(), still_a_tree, choices_file=choices)


def test_the_colour_theme_picked_in_the_palette_is_the_one_the_next_run_starts_with(tmp_path):
    choices = tmp_path / "ui.json"

    async def pick_nord(app, pilot):
        default = app.theme
        await pilot.press("ctrl+p", *"theme")
        await pilot.pause()
        await pilot.press("enter")   # the palette's Theme command lists the themes
        await pilot.pause()
        await pilot.press(*"nord", "enter")
        await pilot.pause()
        assert app.theme == "nord" != default

    async def nord_again(app, pilot):
        assert app.theme == "nord"

    async def the_default(app, pilot):
        assert app.theme == "textual-dark"

    run_ui(FakeNode(), pick_nord, choices_file=choices)
    run_ui(FakeNode(), nord_again, choices_file=choices)
    choices.write_text('{"theme": "a theme of another Textual version"}')
    run_ui(FakeNode(), the_default, choices_file=choices)


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




def test_x_acts_only_on_the_guests_tab_and_asks_before_losing_work(node):
    async def scenario(app, pilot):
        await pilot.press("4", "x")  # the guest selected on the hidden Guests tab must not go
        await pilot.pause()
        assert len(node.snapshot().guests) == 3
        assert "Evict a guest" in screen_text(app)  # the notice says where the guests are
        await pilot.press("2", "down", "down", "x")  # b7e1a2c9-4.2: 1m20s of CPU since its checkpoint
        await pilot.pause()
        assert "1m20s of CPU work since then are lost" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert len(node.snapshot().guests) == 3
        await pilot.press("x", "y")
        await pilot.pause()
        assert [g.task_id for g in node.snapshot().guests] == ["b7e1a2c9-4.0", "a91f3d20-5.1"]
        await pilot.press("home", "x")  # 38 s since its checkpoint: goes without a question
        await pilot.pause()
        assert [g.task_id for g in node.snapshot().guests] == ["a91f3d20-5.1"]

    run_ui(node, scenario)


def test_palette_ranks_tabs_first_and_asks_before_evicting(node):
    async def scenario(app, pilot):
        await pilot.press("ctrl+p", *"Guests")
        await wait_in_app(pilot, lambda: "Show Guests" in screen_text(app))
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "guests"
        assert len(node.snapshot().guests) == 3
        await pilot.press("ctrl+p", *"Evict all")
        await wait_in_app(pilot, lambda: "Evict all guests (e)" in screen_text(app))
        await pilot.press("enter")
        await pilot.pause()
        assert "Evict all guests?" in screen_text(app)
        assert len(node.snapshot().guests) == 3
        await pilot.press("y")
        await pilot.pause()
        assert node.snapshot().guests == ()

    run_ui(node, scenario)


def test_c_cancels_the_selected_assignment_after_asking(node):
    async def scenario(app, pilot):
        await pilot.press("c")  # not on Assignments: nothing is cancelled
        await pilot.pause()
        assert "Cancel an assignment" in screen_text(app)
        await pilot.press("4", "c")  # f00dfeed-7, running
        await pilot.pause()
        assert "Cancel f00dfeed-7?" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert node.snapshot().assignments[0].state == "running"
        await pilot.press("c", "y")
        await pilot.pause()
        assert node.snapshot().assignments[0].state == "cancelled"
        assert "cancelled" in screen_text(app)

    run_ui(node, scenario)


def test_enter_opens_the_selected_row_in_full(node):
    async def scenario(app, pilot):
        await pilot.press("2", "down", "enter")
        await pilot.pause()
        text = screen_text(app)
        assert "Guest a91f3d20-5.1" in text and "Press escape to close" in text
        await pilot.press("escape", "3", "enter")
        await pilot.pause()
        assert f"Peer {app.query_one('PeersPane').selected_peer().name}" in screen_text(app)
        await pilot.press("escape", "4", "enter")
        await pilot.pause()
        assert "Assignment f00dfeed-7 (raytrace, running)" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert "Press escape to close" not in screen_text(app)

    run_ui(node, scenario)


def test_question_mark_lists_the_keys_of_the_tab_in_view_first(node):
    async def scenario(app, pilot):
        await pilot.press("2", "question_mark")
        await pilot.pause()
        text = screen_text(app)
        assert text.index("On Guests (2)") < text.index("evict the selected guest") < text.index("Everywhere")
        await pilot.press("escape", "4", "question_mark")
        await pilot.pause()
        text = screen_text(app)
        assert text.index("On Assignments (4)") < text.index("cancel the selected assignment") < text.index("Everywhere")

    run_ui(node, scenario)


def test_a_tab_change_that_lands_after_the_help_opened_leaves_q_to_close_the_help(node):
    """On a loaded machine the tab bar's "activated" message for a tab key can arrive after ? opened
    the help; it once moved the help's focus to the hidden table, and q then asked to quit."""
    async def scenario(app, pilot):
        await pilot.press("3", "question_mark")
        await pilot.pause()
        tabbed = app.query_one(TabbedContent)
        tabbed.post_message(TabbedContent.TabActivated(tabbed, tabbed.get_tab("peers")))  # the late one
        await pilot.pause()
        await pilot.press("q")
        await pilot.pause()
        assert "frost-tui keys" not in screen_text(app)
        assert "Quit frost-tui?" not in screen_text(app) and app.is_running
        await pilot.press("4")
        await pilot.pause()
        assert tabbed.active == "assignments"  # the keys reach the tabs again

    run_ui(node, scenario)


def dialog_words(app) -> str:
    """The screen's words with the borders beside a dialog taken out: a wrapped sentence reads whole."""
    return " ".join(screen_text(app).translate({ord(c): " " for c in "│█▊▎╭╮╰╯"}).split())


def test_q_on_a_master_of_running_work_says_it_waits_unclipped_at_80x24():
    node = FakeNode(guests=0)  # no guests here, but master of the running f00dfeed-7

    async def scenario(app, pilot):
        await pilot.press("q")
        await pilot.pause()
        text = dialog_words(app)
        assert "master of 1 running assignment:" in text
        assert "the results wait for frost-tui to start again here." in text
        assert "Quit now (k)" in text and "Evict first" not in text
        await pilot.press("k")

    app = run_ui(node, scenario, size=(80, 24))
    assert app.return_code == 0


def test_q_with_guests_says_what_quitting_loses_unclipped_at_80x24(node):
    async def scenario(app, pilot):
        await pilot.press("q")
        await pilot.pause()
        text = dialog_words(app)
        assert "3 guests of other machines run here" in text
        assert "(2m57s of CPU work since then is lost)" in text  # 38 + 59 + 80 s
        assert "checkpoints and moves to another peer" in text
        assert "Evict first (e)" in text and "Cancel (esc)" in text
        await pilot.press("escape")
        await pilot.pause()
        assert "Quit frost-tui?" not in screen_text(app)

    run_ui(node, scenario, size=(80, 24))


def test_q_on_a_lone_desk_running_its_own_units_says_they_go_on_when_it_starts_again():
    # A single node runs its own assignment's units: no master elsewhere restarts them, and no peer takes them.
    lone = demo_snapshot(peers=0, guests=2)
    own = tuple(dataclasses.replace(g, assignment_id="f00dfeed-7", task_id=f"f00dfeed-7.{i}")
                for i, g in enumerate(lone.guests))
    node = FakeNode(snapshot=dataclasses.replace(lone, guests=own))

    async def scenario(app, pilot):
        await pilot.press("q")
        await pilot.pause()
        text = dialog_words(app)
        assert "2 units of your own assignments run here" in text and "of other machines" not in text
        assert "they go on from their last checkpoints when frost-tui starts again (1m37s" in text   # 38 + 59 s
        assert "evict first and each checkpoints now." in text and "moves to" not in text
        assert "with no peer in reach, nothing works on it until frost-tui starts again here." in text
        assert "Evict first (e)" in text
        await pilot.press("escape")

    run_ui(node, scenario, size=(80, 24))


def _footer_keys(app) -> list[tuple[str, int, int]]:
    """The footer's keys as shown: each one's text and the columns it spans."""
    return [(key.render().plain.strip(), key.region.x, key.region.right)
            for key in app.query_one(KeysFooter).query(FooterKey)]


def _assert_whole_keys_that_fit(app, where):
    footer = app.query_one(KeysFooter).region
    keys = _footer_keys(app)
    for (text, start, end), (_, next_start, _) in zip(keys, keys[1:]):
        assert end <= next_start, (where, text, keys)  # no key drawn over the next, none cut by the palette's
    assert all(footer.x <= start and end <= footer.right for _, start, end in keys), (where, keys)


def test_80x24_footer_shows_whole_keys_quit_help_and_the_tabs_own_on_every_tab(node):
    # At 80 columns the footer used to end mid-word ("f Finish+pau"), its later keys out of sight: on the
    # Assignments tab even "s Submit". Now it words them shorter, then leaves out the least needed.
    own = {"1": "p Pause", "2": "x Evict one", "3": "/ Filter", "4": "s Submit", "5": "l Load", "6": "/ Filter",
           "7": "^s Save", "8": "e Evict all"}

    async def scenario(app, pilot):
        for key in "12345678":
            await pilot.press(key)
            await pilot.pause()
            _assert_whole_keys_that_fit(app, key)
            shown = [text for text, _, _ in _footer_keys(app)]
            assert {"q Quit", "? Help", own[key]} <= set(shown), (key, shown)
            assert "Pause/resume" not in screen_text(app).splitlines()[-1]

    run_ui(node, scenario, size=(80, 24))


def test_a_wide_footer_has_every_key_of_the_tab_whole_and_refits_when_the_terminal_narrows(node):
    async def scenario(app, pilot):
        await pilot.press("4")
        await pilot.pause()
        shown = [text for text, _, _ in _footer_keys(app)]
        assert shown == ["c Cancel", "w Save result", "v Columns", "m Move", "/ Filter", "q Quit", "? Help",
                         "p Pause/resume", "e Evict all", "s Submit", "f Finish+pause", "^p palette"]
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.pause()
        _assert_whole_keys_that_fit(app, "narrowed")
        assert "s Submit" in [text for text, _, _ in _footer_keys(app)]

    run_ui(node, scenario, size=(140, 45))


def test_the_footer_follows_the_keys_of_the_tab_in_view_however_often_it_is_left_and_shown_again(node):
    # The footer is rebuilt only when its keys change (a switch between tabs showing the same keys skips it):
    # the Plugins tab's own key must come and go with the tab, each time.
    async def scenario(app, pilot):
        for _ in range(2):
            for key, shows_remove in (("5", True), ("1", False), ("2", False), ("5", True), ("6", False)):
                await pilot.press(key)
                await pilot.pause()
                footer = screen_text(app).splitlines()[-1]
                assert ("r Remove plugin" in footer) == shows_remove, (key, footer)

    run_ui(node, scenario)


def test_80x24_columns_make_way_by_priority_and_say_so(node):
    async def scenario(app, pilot):
        await pilot.press("2")
        await pilot.pause()
        header = next(line for line in screen_text(app).splitlines() if "Task" in line)
        assert "State" in header and "At risk" in header and "Progress" in header
        # Memory, dropped before Plugin, fits again once Plugin is gone.
        assert "Memory" in header and "more → Assignment, Plugin, Origin (" in screen_text(app)
        await pilot.press("3")
        await pilot.pause()
        header = next(line for line in screen_text(app).splitlines() if "Name" in line)
        for column in ("State", "Available", "Mode", "RTT"):
            assert column in header
        assert "more → Address" in screen_text(app)

    run_ui(node, scenario, size=(80, 24))


def test_a_narrow_column_dropped_before_a_wide_one_comes_back_when_the_wide_ones_going_left_room(node):
    # At 110 columns Peers drops Last minute, then Address; without Address, Last minute fits again.
    async def scenario(app, pilot):
        await pilot.press("3")
        await pilot.pause()
        header = next(line for line in screen_text(app).splitlines() if "Name" in line)
        assert "Last minute" in header and "Address" not in header, header
        assert "more → Address (wider window" in screen_text(app)

    run_ui(node, scenario, size=(110, 30))


def test_a_wide_window_shows_every_column_and_no_hint(node):
    async def scenario(app, pilot):
        await pilot.press("2")
        await pilot.pause()
        assert "Assignment" in screen_text(app) and "more →" not in screen_text(app)

    run_ui(node, scenario)


def test_u_trusts_the_selected_quarantined_peer_again(node):
    async def scenario(app, pilot):
        await pilot.press("3")
        await pilot.pause()
        selected = app.query_one(PeersPane).selected_peer()
        # This node's master caught the selected peer returning a wrong result.
        node.publish(peers=tuple(dataclasses.replace(p, quarantined="a wrong result of x-1.0")
                                 if p.node_id == selected.node_id else p for p in node.snapshot().peers))
        await wait_in_app(pilot, lambda: "quarantined" in screen_text(app))
        await pilot.press("u")
        await wait_in_app(pilot, lambda: "quarantined" not in screen_text(app))
        assert not any(p.quarantined for p in node.snapshot().peers)

    run_ui(node, scenario)
