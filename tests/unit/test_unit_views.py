"""A master's view of its units: no old host for a re-queued one, a dead host named dead, no ETA while paused,
a unit placed ahead of a busy CPU shown waiting."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from frost_core.api.queries import FindUnits
from frost_core.api.snapshot import SNAPSHOT_UNITS, AssignmentView, UnitView
from frost_core.master.placement import WaitingReasons
from frost_core.master.store import Delivery, MasterStore, NewUnit, Placement, UnitTally
from frost_core.membership.records import MemberState
from frost_core.node.views import SettledViews, assignment_view, live_node_ids, peer_names
from frost_core.wire.messages import from_plain, to_plain
from frost_tui import tables
from frost_tui.shots.fixed import demo_snapshot


def new_sweep(store: MasterStore, units: int) -> str:
    """An assignment of `units` empty units in `store`; its id."""
    return store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h", params={},
                                   units=[NewUnit(data={}, memory_bytes=1, cost=1.0)] * units)


def test_a_requeued_unit_shows_no_host_and_a_suspended_one_says_so(tmp_path):
    store = MasterStore(tmp_path / "master.sqlite", node_id="m")
    try:
        assignment = new_sweep(store, 2)
        epoch = store.place_unit(assignment, 0, host="deadbeef-host")
        store.place_unit(assignment, 1, host="cafe-host")
        store.requeue_unit(assignment, 0, epoch=epoch, progress=0.0, error=None)   # its host died
        shown = assignment_view(store.assignment(assignment), now=0.0, results_dir=tmp_path,
                                names={"deadbeef-host": "fermat", "cafe-host": "curie"},
                                reported={f"{assignment}.1": "suspended"})
    finally:
        store.close()
    queued, running = shown.units
    assert (queued.state, queued.host, queued.host_name) == ("queued", "", "")
    assert (running.state, running.host_name, running.reported) == ("running", "curie", "suspended")


def test_a_unit_standing_still_on_its_host_says_who_holds_it_and_its_assignment_is_not_called_queued(tmp_path):
    store = MasterStore(tmp_path / "master.sqlite", node_id="m")
    try:
        assignment = new_sweep(store, 4)
        for index in range(3):
            store.place_unit(assignment, index, host="cafe-host")
        shown = assignment_view(store.assignment(assignment), now=0.0, results_dir=tmp_path,
                                names={"cafe-host": "curie"},
                                reported={f"{assignment}.0": "paused", f"{assignment}.1": "suspended",
                                          f"{assignment}.2": "waiting"}, alive={"m", "cafe-host"})
    finally:
        store.close()
    paused, suspended, ahead, queued = shown.units
    assert paused.waiting == ("curie's owner paused its guests: it goes on when they resume, or on another peer if "
                              "the pause lasts (or move it there now)")
    assert suspended.waiting == "curie's owner is busy: it goes on once they are done, or moves if that lasts"
    assert ahead.waiting == "placed ahead on curie: it starts when a CPU there frees"
    # The CLI's assignment row says why its *queued* units wait, and this one's queued unit has no reason yet.
    row = tables.assignments([to_plain(AssignmentView, shown)]).splitlines()[-1]
    assert "queued:" not in row and "paused" not in row
    unit_rows = tables.units({"units": [to_plain(UnitView, u) for u in shown.units], "matched": 4, "unit_count": 4}, "")
    assert "curie's owner paused its guests" in unit_rows.splitlines()[2]


def test_a_unit_paused_on_a_lone_machine_is_not_offered_a_move_with_no_live_peer_to_take_it(tmp_path):
    store = MasterStore(tmp_path / "master.sqlite", node_id="m")
    try:
        assignment = new_sweep(store, 1)
        store.place_unit(assignment, 0, host="m")
        reported = {f"{assignment}.0": "paused"}
        alone = assignment_view(store.assignment(assignment), now=0.0, results_dir=tmp_path,
                                names={"m": "desk", "cafe-host": "curie (dead)"}, reported=reported,
                                alive={"m"}).units[0]
        with_a_peer = assignment_view(store.assignment(assignment), now=0.0, results_dir=tmp_path,
                                      names={"m": "desk", "cafe-host": "curie"}, reported=reported,
                                      alive={"m", "cafe-host"}).units[0]
    finally:
        store.close()
    assert alone.waiting == "desk's owner paused its guests: it goes on when they resume"
    assert with_a_peer.waiting.endswith("or on another peer if the pause lasts (or move it there now)")


def test_an_assignment_whose_units_all_stand_still_has_no_eta(tmp_path):
    store = MasterStore(tmp_path / "master.sqlite", node_id="m")
    try:
        assignment = new_sweep(store, 1)
        store.place_unit(assignment, 0, host="cafe-host")
        record = store.assignment(assignment)
        task = f"{assignment}.0"
        live = {task: 0.5}
        running = assignment_view(record, now=record.created_at + 60, results_dir=tmp_path, live=live)
        paused = assignment_view(record, now=record.created_at + 60, results_dir=tmp_path, live=live,
                                 reported={task: "paused"})
    finally:
        store.close()
    assert running.eta_seconds == 60.0   # half done in a minute: a minute to go
    assert paused.eta_seconds is None    # it makes no progress until its host's owner resumes it


def test_a_unit_placed_ahead_shows_waiting_and_does_not_stall_its_assignment(tmp_path):
    store = MasterStore(tmp_path / "master.sqlite", node_id="m")
    try:
        assignment = new_sweep(store, 2)
        store.place_unit(assignment, 0, host="cafe-host")
        store.place_unit(assignment, 1, host="cafe-host")
        record = store.assignment(assignment)
        shown = assignment_view(record, now=record.created_at + 60, results_dir=tmp_path,
                                live={f"{assignment}.0": 0.5}, reported={f"{assignment}.1": "waiting"})
    finally:
        store.close()
    running, ahead = shown.units
    assert (running.reported, ahead.reported) == ("", "waiting")   # not "running": its host has no CPU for it yet
    assert shown.eta_seconds is not None    # the one running makes progress: the assignment is not stalled


def test_a_dead_host_is_named_as_dead_where_units_are_shown():
    def member(node_id: str, name: str, state: MemberState) -> SimpleNamespace:
        return SimpleNamespace(node_id=node_id, name=name, address=("10.0.0.1", 1), state=state,
                               is_active=state in (MemberState.ALIVE, MemberState.SUSPECT))

    node = SimpleNamespace(node_id="me", config=SimpleNamespace(node_name="turing"), membership=SimpleNamespace(
        members=lambda: [member("a", "curie", MemberState.ALIVE), member("d", "fermat", MemberState.DEAD)]))
    assert peer_names(node) == {"me": "turing", "a": "curie", "d": "fermat (dead)"}
    assert live_node_ids(node) == {"me", "a"}


def test_a_finished_assignments_view_is_made_once_and_again_when_one_of_its_hosts_is_named_otherwise(tmp_path):
    """The snapshot keeps a finished sweep's view while nothing it shows changed; its host declared dead since
    (or renamed) shows in the next one."""
    store = MasterStore(tmp_path / "master.sqlite", node_id="m")
    try:
        assignment = new_sweep(store, 1)
        epoch = store.place_unit(assignment, 0, host="cafe-host")
        store.accept_result(assignment, 0, epoch=epoch, result=b"\x00")
        store.finish_assignment(assignment, data=b"r", media_type="text/plain", filename="r.txt")
        views = SettledViews()

        def shown(names):
            (listed,) = store.listing(SNAPSHOT_UNITS)
            return views.view(listed.record, names, lambda: assignment_view(
                listed.record, now=0.0, results_dir=tmp_path, names=names, tally=listed.tally))

        first = shown({"cafe-host": "curie", "other": "fermat"})
        assert shown({"cafe-host": "curie", "other": "fermat (dead)"}) is first   # not a host of this one
        later = shown({"cafe-host": "curie (dead)"})
    finally:
        store.close()
    assert first.units[0].host_name == "curie" and later.units[0].host_name == "curie (dead)"


def test_a_snapshot_carries_the_units_a_screen_shows_of_a_long_sweep_and_counts_all_of_them(tmp_path):
    """A 10,000-unit sweep in every snapshot cost the node ~90 ms a push and the attached UI ~110 ms: the snapshot
    carries the SNAPSHOT_UNITS the screen shows, and the counts, progress and moves of all, counted by the store."""
    store = MasterStore(tmp_path / "master.sqlite", node_id="m")
    try:
        assignment = store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h", params={},
                                             units=[NewUnit(data={"i": i}, memory_bytes=1, cost=1.0) for i in range(1_000)])
        store.place_units([Placement(assignment, i, "cafe-host") for i in range(1_000)])
        store.accept_results([Delivery(assignment, i, 1, b"\x00", cpu_seconds=1.0) for i in range(300)])
        assert store.confirm_location(assignment, 999, epoch=2, host="other-host")   # moved there
        store.requeue_unit(assignment, 998, epoch=1, progress=0.0)
        live = {f"{assignment}.{i}": 0.5 for i in range(300, 998)}

        def views():
            record = store.assignment(assignment)
            (listed,) = store.listing(SNAPSHOT_UNITS)
            return [assignment_view(shown, now=record.created_at + 60, results_dir=tmp_path, live=live, tally=tally)
                    for shown, tally in ((record, None), (listed.record, listed.tally))]

        whole, window = views()
        paused = {f"{assignment}.{i}": "paused" for i in range(1_000)}
        store.place_units([Placement(assignment, 998, "cafe-host")])
        still = [assignment_view(listed.record, now=0.0, results_dir=tmp_path, reported=paused, tally=listed.tally)
                 for listed in store.listing(SNAPSHOT_UNITS)]
        store.accept_results([Delivery(assignment, i, 1, b"\x00", cpu_seconds=1.0) for i in range(300, 998)])
        store.accept_results([Delivery(assignment, 998, 2, b"\x00", cpu_seconds=1.0)])
        store.accept_results([Delivery(assignment, 999, 2, b"\x00", cpu_seconds=1.0)])
        all_done, all_done_window = views()
    finally:
        store.close()
    assert len(whole.units) == 1_000
    assert [u.index for u in window.units] == list(range(300, 300 + SNAPSHOT_UNITS))
    assert window.units == whole.units[300:300 + SNAPSHOT_UNITS]
    for shown in (whole, window):
        assert (shown.unit_count, shown.units_done, shown.moves) == (1_000, 300, 1)
        assert shown.progress == pytest.approx((300 + 698 * 0.5) / 1_000)   # 998 queued, 999 not running here
        assert shown.eta_seconds == pytest.approx(60 * (1 - shown.progress) / shown.progress)
    assert still[0].eta_seconds is None    # every unit left is paused where it runs: no ETA
    assert [u.index for u in all_done_window.units] == list(range(800, 1_000))   # the last ones done
    for shown in (all_done, all_done_window):
        assert (shown.units_done, shown.progress) == (1_000, 1.0)


def shown_units(states: list[str], rows: int) -> list[int]:
    """The rule `MasterStore.listing` follows in SQL, for units in these `states` (in index order): every running
    one, then the others not done by index, then the last done, `rows` at most, in index order."""
    running = [index for index, state in enumerate(states) if state == "running"]
    waiting = [index for index, state in enumerate(states) if state not in ("running", "done")]
    done = [index for index, state in enumerate(states) if state == "done"]
    chosen = (running + waiting)[:rows]
    return sorted(chosen + done[::-1][:rows - len(chosen)])


def test_the_screen_shows_a_straggler_and_the_sweeps_front_however_far_apart(tmp_path):
    """A unit paused on somebody's desk for an hour stays running while the sweep goes on: the store lists it, the
    units running at the front and those waiting after them (a window from the first unit not done showed the
    straggler and the 199 done units after it); at the end, the last ones done."""
    store = MasterStore(tmp_path / "master.sqlite", node_id="m")
    try:
        assignment = new_sweep(store, 1_000)
        store.place_units([Placement(assignment, i, "cafe-host") for i in range(606)])
        store.accept_results([Delivery(assignment, i, 1, b"\x00") for i in range(600) if i != 5])

        def listed() -> list[int]:
            (shown,) = store.listing(SNAPSHOT_UNITS)
            return [unit.index for unit in shown.record.units]

        assert listed() == [5, *range(600, 600 + SNAPSHOT_UNITS - 1)]
        store.place_units([Placement(assignment, 900, "cafe-host")])   # placed out of order: running ones first
        assert listed() == [5, *range(600, 600 + SNAPSHOT_UNITS - 2), 900]
        store.place_units([Placement(assignment, i, "cafe-host") for i in range(606, 1_000) if i != 900])
        store.accept_results([Delivery(assignment, i, 1, b"\x00") for i in (5, *range(605, 999))])
        assert listed() == [*range(600, 605), *range(805, 1_000)]   # the 6 not done, then the last ones done
        store.accept_results([Delivery(assignment, i, 1, b"\x00") for i in (600, 601, 602, 603, 604, 999)])
        assert listed() == list(range(800, 1_000))   # all done: the last
    finally:
        store.close()
    assert shown_units(["failed", "done", "cancelled"], 2) == [0, 2]
    assert shown_units([], SNAPSHOT_UNITS) == []


operations = st.lists(st.tuples(st.sampled_from(["on", "on", "on", "move", "requeue", "fail", "lost"]),
                                st.integers(0, 29), st.sampled_from(["cafe", "beef", "f00d"])), max_size=80)
"""What befalls a unit: "on" places a queued one and completes a running one."""


@settings(max_examples=100, deadline=None)
@example(size=5, checked=frozenset({0, 1}), steps=[("on", 0, "cafe"), ("on", 0, "cafe"), ("on", 1, "beef"),
                                                    ("move", 1, "f00d"), ("on", 2, "cafe"), ("fail", 2, "cafe"),
                                                    ("on", 3, "beef"), ("lost", 3, "beef"), ("on", 4, "cafe")],
         end=None, rows=2)
@given(st.integers(1, 30), st.frozensets(st.integers(0, 29)), operations, st.sampled_from([None, "cancel", "fail"]),
       st.integers(1, 12))
def test_the_store_counts_a_listed_assignment_as_its_units_say(size, checked, steps, end, rows):
    """Whatever its units went through, the tally the store keeps as they change is that of its units, and so are
    the units it shows: a screen shows the same numbers as a script asking for the assignment whole."""
    with tempfile.TemporaryDirectory() as folder:
        store = MasterStore(Path(folder) / "master.sqlite", node_id="m")
        try:
            assignment = store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h", params={},
                                                 units=[NewUnit(data={}, memory_bytes=1, cost=1.0)] * size, verify=0.5,
                                                 checked=frozenset(i for i in checked if i < size))
            for operation, index, host in steps:
                index %= size
                unit = store.assignment(assignment).units[index]
                if operation == "on" and unit.state == "queued":
                    store.place_unit(assignment, index, host=host)
                elif operation == "on" and unit.state == "running":
                    store.accept_result(assignment, index, epoch=unit.epoch, result=b"\x00")
                elif operation == "move" and unit.state == "running":
                    store.confirm_location(assignment, index, epoch=unit.epoch + 1, host=host)
                elif operation == "requeue" and unit.state == "running":   # it goes on from a checkpoint at 25 %
                    store.requeue_unit(assignment, index, epoch=unit.epoch, error="broke", progress=0.25)
                elif operation == "fail" and unit.state == "running":
                    store.fail_unit(assignment, index, epoch=unit.epoch, error="broke")
                elif operation == "lost":
                    store.requeue_hosted_by(host)
            if end == "cancel":
                store.cancel_assignment(assignment)
            elif end == "fail":
                store.fail_assignment(assignment, "gave up")
            units = store.assignment(assignment).units
            (listed,) = store.listing(rows)
        finally:
            store.close()
    assert listed.tally == UnitTally.of(units)
    assert listed.record.units == tuple(units[index] for index in shown_units([u.state for u in units], rows))


def test_an_older_nodes_view_without_the_counts_is_counted_from_its_units():
    """A query's reply from a node of before the window carries every unit and no counts."""
    plain = to_plain(AssignmentView, demo_snapshot().assignments[0])
    for name in ("unit_count", "units_done", "moves"):
        del plain[name]
    older = from_plain(AssignmentView, plain)
    assert (older.unit_count, older.units_done, older.moves) == (6, 2, 3)


async def test_finding_units_matches_what_their_rows_show_and_every_word_must_match(tmp_path):
    """`FindUnits` reads only the units' states, hosts and errors to match them, and words them as the screen does:
    a unit shows its host's peer name and the state its host reports. What it finds reads whole, as a query's."""
    from frost_core.node.answers import answer

    store = MasterStore(tmp_path / "master.sqlite", node_id="m")
    try:
        assignment = store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h", params={},
                                             units=[NewUnit(data={"i": i}, memory_bytes=1, cost=1.0) for i in range(300)])
        store.place_units([Placement(assignment, i, "cafe-host") for i in (12, 120, 250)])
        epoch = store.place_unit(assignment, 7, host="beef-host")
        store.requeue_unit(assignment, 7, epoch=epoch, progress=0.0, error="MemoryError in step")
        node = SimpleNamespace(
            store=store, results_dir=tmp_path, node_id="m", config=SimpleNamespace(node_name="turing"),
            membership=SimpleNamespace(members=lambda: [SimpleNamespace(
                node_id="cafe-host", name="curie", address=("10.0.0.1", 1), state=MemberState.ALIVE, is_active=True)]),
            live_progress=dict, unit_etas=dict, gang_views=dict,
            unit_waiting=lambda: WaitingReasons({f"{assignment}.7": "no peer with free CPU"},
                                                lambda: {assignment: "waits its turn"}),   # as a round leaves them
            unit_states=lambda: {f"{assignment}.12": "paused"},
            unit_leaving=lambda: {f"{assignment}.12": time.time() + 600})   # its host's pause sends it on then

        async def found(words, limit=SNAPSHOT_UNITS):
            answered = await answer(node, FindUnits(assignment_id=assignment, match=words, limit=limit))
            return [u.index for u in answered.units], answered.matched

        assert await found("12") == ([12], 1)                       # a number is a unit's, whole
        assert await found("12 PAUSED") == ([12], 1)
        for nothing in ("12 running", "12 120", "300"):
            assert await found(nothing) == ([], 0)
        assert await found("paused curie") == ([12], 1)             # as its row says: paused, on the peer curie
        assert await found("another peer at") == ([12], 1)          # ... and when it leaves curie by itself
        assert await found("running") == ([120, 250], 2)
        assert await found("failed") == ([7], 1) and await found("memoryerror free cpu") == ([7], 1)
        assert await found("free beef") == ([], 0)                  # a queued unit shows no host
        assert await found("queued", limit=2) == ([0, 1], 297)
        assert await found("its turn", limit=2) == ([0, 1], 296)   # the queue past the round: its assignment's
        assert await found("", limit=0) == ([], 300)               # no word: every unit
        whole = {u.index: u for u in store.assignment(assignment).units}
        (unit,) = (await answer(node, FindUnits(assignment_id=assignment, match="7", limit=1))).units
        assert (unit.task_id, unit.failures, unit.error) == (whole[7].task_id, 1, "MemoryError in step")
    finally:
        store.close()
