"""The Assignments tab's result panel (what an assignment threw away, and why, next to its result), which of a
long sweep's units it lists and the units found for the owner, and a gang's members."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time

from rich.console import Console

from frost_core import AssignmentView, FindUnits, FoundUnits, GangMemberView, GangView, UnitView
from frost_tui import tables
from frost_tui.tabs.assignments import assignment_row, describe_result, member_row, what_cancel_loses
from frost_tui.widgets.live_table import LiveTable
from tests.tui.conftest import run_ui, screen_text
from tests.tui.fake_node import FakeNode
from tests.waiting import wait_in_app


def panel_text(assignment: AssignmentView) -> str:
    console = Console(width=200, record=True)
    console.print(describe_result(assignment, now=100.0))
    return console.export_text()


def done(**waste) -> AssignmentView:
    return AssignmentView(
        id="abababab-1", plugin="raytrace", state="done", progress=1.0, created_at=0.0, finished_at=90.0,
        eta_seconds=None, params={"width": 64}, units=(), result_media_type="image/png",
        result_filename="raytrace.png", result_path="/tmp/raytrace.png", error=None,
        wasted_seconds=sum(waste.values()), waste={k.replace("_", " "): v for k, v in waste.items()},
    )


def test_a_running_assignment_offers_a_move_only_where_a_unit_has_somewhere_to_go(node):
    # The demo cluster has live peers: the hint is there. On a lone desk m could only say there is nowhere to go.
    async def scenario(app, pilot):
        await pilot.press("4")
        await wait_in_app(pilot, lambda: "press m to move the selected unit" in screen_text(app))
        node.publish(peers=tuple(p for p in node.snapshot().peers if p.is_self))
        await wait_in_app(pilot, lambda: "press m to move" not in screen_text(app) and "Parameters" in screen_text(app))

    run_ui(node, scenario)


def test_the_result_panel_names_the_work_thrown_away_and_why():
    text = panel_text(done(redone_since_checkpoint=12.2, superseded_copy=2.0))
    assert "Wasted  14s of guest work thrown away: 12s redone since checkpoint, 2s superseded copy" in text


def test_an_assignment_that_threw_nothing_away_says_nothing_about_it():
    assert "Wasted" not in panel_text(done())


def test_the_panel_says_which_units_of_a_long_sweep_the_table_shows():
    # A snapshot carries SNAPSHOT_UNITS of a sweep's units (the node's MasterStore.listing): the panel says which.
    shown = tuple(UnitView(index=i, task_id=f"abababab-1.{i}", state="queued", host="", progress=0.0, moves=0,
                           failures=0, error=None) for i in range(1_200, 1_400))
    running = dataclasses.replace(done(), state="running", units=shown, unit_count=10_000, units_done=1_200)
    assert "Units  200 of 10,000 shown: those running, then those waiting, by number" in panel_text(running)
    assert "1200/10000" in assignment_row(running, now=100.0)
    ending = dataclasses.replace(running, units_done=9_950)
    assert "Units  200 of 10,000 shown: the 50 not done, then the last ones done" in panel_text(ending)
    finished = dataclasses.replace(running, units_done=10_000)
    assert "Units  200 of 10,000 shown: the last ones done" in panel_text(finished)
    whole = dataclasses.replace(running, units=shown[:50], unit_count=50, units_done=0)
    assert "Units " not in panel_text(whole)


GANG = GangView(
    phase="running", reason="", superstep=7, epoch=2,
    members=(GangMemberView(0, "aa", "alpha", 7, True, 3.2, 1), GangMemberView(1, "bb", "beta", 7, False, 0.1, 0),
             GangMemberView(2, "cc", "gamma", 7, True, 2.9, 0)),
    checkpoint_superstep=4, checkpoint_at=50.0, checkpoint_bytes=2048, moves=1, restarts=1,
)


def running_gang() -> AssignmentView:
    return dataclasses.replace(done(), plugin="heat-diffusion", state="running", progress=0.0, result_path=None,
                               result_filename=None, gang=GANG)


def test_a_gang_shows_its_members_hosts_supersteps_and_barrier_waits():
    row = assignment_row(running_gang(), now=100.0)
    assert row[3] == "superstep 7" and row[4] == "gang of 3" and row[5] == "1"
    members = [member_row("abababab-1", m) for m in GANG.members]
    assert [(m[0], m[1].plain, m[2], m[3]) for m in members] == [
        ("abababab-1.0", "at barrier", "alpha", "superstep 7"), ("abababab-1.1", "stepping", "beta", "superstep 7"),
        ("abababab-1.2", "at barrier", "gamma", "superstep 7")]
    assert members[1][7].plain == "waited 0s at barriers" and members[0][7].plain == "waited 3s at barriers"
    text = panel_text(running_gang())
    assert "Gang  3 members, running at superstep 7" in text
    assert "Last global checkpoint  before superstep 4 (2048 bytes), taken 50s ago   Moves  1   Restarts  1" in text


def test_a_gang_member_with_no_host_yet_says_so_not_how_long_it_waited_at_barriers():
    waiting = dataclasses.replace(GANG, phase="waiting", superstep=0,
                                  members=tuple(GangMemberView(r, "", "", 0, False, 0.0, 0) for r in range(2)))
    unplaced = "no host yet: the gang starts once every member has one"
    assert [(row[1].plain, row[7].plain) for row in (member_row("abababab-1", m) for m in waiting.members)] == [
        ("waiting", unplaced)] * 2
    reply = [json.loads(json.dumps(dataclasses.asdict(dataclasses.replace(running_gang(), gang=waiting))))]
    assert tables.assignments(reply).splitlines()[3].endswith(unplaced)


def test_the_question_before_a_cancel_says_what_a_gang_or_a_sweep_loses():
    assert what_cancel_loses(running_gang()) == (
        "abababab-1 (heat-diffusion) stops: its 3 members stop at superstep 7 and the gang's work is thrown away; its "
        "last global checkpoint (before superstep 4) is deleted.")
    fresh = dataclasses.replace(running_gang(), gang=dataclasses.replace(GANG, checkpoint_superstep=None))
    assert what_cancel_loses(fresh).endswith("; no global checkpoint was taken yet.")
    sweep = dataclasses.replace(done(), state="running", unit_count=3, units_done=2)
    assert what_cancel_loses(sweep).endswith(": 1 unfinished unit stops wherever it runs and its work is thrown "
                                             "away; 2 finished units give no result.")


def test_a_finished_gangs_members_are_done_not_stepping():
    finished = dataclasses.replace(GANG, phase="finished", reason="finished after superstep 7")
    assert [member_row("abababab-1", m, finished.phase)[1].plain for m in finished.members] == ["done"] * 3
    reply = [json.loads(json.dumps(dataclasses.asdict(dataclasses.replace(running_gang(), gang=finished))))]
    lines = tables.assignments(reply).splitlines()
    assert [line.split()[2] for line in lines[3:]] == ["done"] * 3
    assert lines[2].endswith("finished after superstep 7; 1 move, 1 restart"), lines[2]   # its checkpoint is moot
    one = dataclasses.replace(finished, members=finished.members[:1])
    assert "Gang  1 member, finished after superstep 7" in panel_text(dataclasses.replace(running_gang(), gang=one))


def test_an_ended_gang_whose_members_are_forgotten_is_still_a_gang_of_its_size():
    ended = dataclasses.replace(running_gang(), state="done", progress=1.0, gang=None, gang_members=3, unit_count=0,
                                units_done=0, verification="")
    assert assignment_row(ended, now=100.0)[4] == "gang of 3"
    line = tables.assignments([json.loads(json.dumps(dataclasses.asdict(ended)))]).splitlines()[2]
    assert line.split()[1:7] == ["heat-diffusion", "done", "100%", "gang", "of", "3"], line


def test_frost_tui_assignments_lists_a_gangs_members_under_it():
    reply = [json.loads(json.dumps(dataclasses.asdict(running_gang())))]
    reply[0]["gang"]["checkpoint_at"] = time.time() - 125   # taken a little over two minutes ago
    lines = tables.assignments(reply).splitlines()
    assert "superstep 7" in lines[2] and "gang of 3" in lines[2]
    assert re.search(r"last checkpoint before superstep 4, taken 2m0[5-9]s ago", lines[2]), lines[2]
    assert lines[3].split()[:5] == [".0", "alpha", "at", "barrier", "superstep"] and "waited 3s at barriers" in lines[3]
    assert len(lines) == 6


def test_frost_tui_units_says_how_many_match_and_how_many_it_shows():
    unit = {"task_id": "abababab-1.7", "state": "queued", "reported": "", "host_name": "", "progress": 0.0,
            "moves": 0, "failures": 2, "error": "MemoryError in step", "waiting": "no peer with free CPU"}
    lines = tables.units({"units": [unit], "matched": 1, "unit_count": 10_000}, "failed").splitlines()
    assert lines[2].split()[:6] == ["abababab-1.7", "queued", "—", "0%", "0", "2"] and "MemoryError" in lines[2]
    assert lines[-1] == "1 of 10,000 units matches 'failed'"
    assert tables.units({"units": [unit], "matched": 37, "unit_count": 10_000}, "memoryerror").splitlines()[-1] == \
        "37 of 10,000 units match 'memoryerror'; the first 1 shown"
    assert tables.units({"units": [unit] * 3, "matched": 3, "unit_count": 3}, "").splitlines()[-1] == "3 units"


def test_found_units_follow_the_last_change_even_when_no_snapshot_comes_after_it():
    """The screen asks again for the units it found after each snapshot, at most every FIND_AGAIN seconds: a change
    that came sooner is asked for once the time is up, not left until a later snapshot that may never come (the
    end of a sweep)."""

    class SearchedNode(FakeNode):
        """Answers a search with whatever state the test set last."""

        def __init__(self) -> None:
            super().__init__()
            self.state, self.asked = "running", []

        async def ask(self, query: FindUnits) -> FoundUnits:
            self.asked.append(query)
            assignment = self._snapshot.assignments[0]
            unit = dataclasses.replace(assignment.units[0], state=self.state)
            return FoundUnits(units=(unit,), matched=1, unit_count=assignment.unit_count)

    node = SearchedNode()

    async def scenario(app, pilot):
        sweep = node.snapshot().assignments[0]
        await pilot.press("4")
        app.query_one("AssignmentsPane").select_assignment(sweep.id)
        await pilot.pause()
        await pilot.press("slash", *"0", "enter")
        table = app.query_one("#units-table", LiveTable)
        await wait_in_app(pilot, lambda: table._cells and table._keys[0] == sweep.units[0].task_id and node.asked)
        assert "running" in str(table._cells[table._keys[0]][1])
        node.state = "done"
        node.publish()    # the change's snapshot comes within FIND_AGAIN of the first ask, and no other after it
        await asyncio.sleep(0.2)
        assert len(node.asked) == 1
        await wait_in_app(pilot, lambda: "done" in str(table._cells[table._keys[0]][1]), timeout=5)
        assert [query.match for query in node.asked] == ["0", "0"]

    run_ui(node, scenario)
