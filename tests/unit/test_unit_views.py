"""A master's view of its units: no old host for a re-queued one, a dead host named dead, no ETA while paused,
a unit placed ahead of a busy CPU shown waiting."""

from __future__ import annotations

from types import SimpleNamespace

from frost_core.api.snapshot import SNAPSHOT_UNITS
from frost_core.master.store import Delivery, MasterStore, NewUnit, Placement
from frost_core.membership.records import MemberState
from frost_core.node.views import SettledViews, assignment_view, peer_names, unit_window


def test_a_requeued_unit_shows_no_host_and_a_suspended_one_says_so(tmp_path):
    store = MasterStore(tmp_path / "master.sqlite", node_id="m")
    try:
        assignment = store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h", params={},
                                             units=[NewUnit(data={}, memory_bytes=1, cost=1.0)] * 2)
        epoch = store.place_unit(assignment, 0, host="deadbeef-host")
        store.place_unit(assignment, 1, host="cafe-host")
        store.requeue_unit(assignment, 0, epoch=epoch, error=None)   # its host died
        shown = assignment_view(store.assignment(assignment), now=0.0, results_dir=tmp_path,
                                names={"deadbeef-host": "fermat", "cafe-host": "curie"},
                                reported={f"{assignment}.1": "suspended"})
    finally:
        store.close()
    queued, running = shown.units
    assert (queued.state, queued.host, queued.host_name) == ("queued", "", "")
    assert (running.state, running.host_name, running.reported) == ("running", "curie", "suspended")


def test_an_assignment_whose_units_all_stand_still_has_no_eta(tmp_path):
    store = MasterStore(tmp_path / "master.sqlite", node_id="m")
    try:
        assignment = store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h", params={},
                                             units=[NewUnit(data={}, memory_bytes=1, cost=1.0)])
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
        assignment = store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h", params={},
                                             units=[NewUnit(data={}, memory_bytes=1, cost=1.0)] * 2)
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


def test_a_finished_assignments_view_is_made_once_and_again_when_one_of_its_hosts_is_named_otherwise(tmp_path):
    """The snapshot keeps a finished sweep's view while nothing it shows changed; its host declared dead since
    (or renamed) shows in the next one."""
    store = MasterStore(tmp_path / "master.sqlite", node_id="m")
    try:
        assignment = store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h", params={},
                                             units=[NewUnit(data={}, memory_bytes=1, cost=1.0)])
        epoch = store.place_unit(assignment, 0, host="cafe-host")
        store.accept_result(assignment, 0, epoch=epoch, result=b"\x00")
        store.finish_assignment(assignment, data=b"r", media_type="text/plain", filename="r.txt")
        views = SettledViews()

        def shown(names):
            (record,) = store.assignments()
            return views.view(record, names, lambda: assignment_view(record, now=0.0, results_dir=tmp_path, names=names))

        first = shown({"cafe-host": "curie", "other": "fermat"})
        assert shown({"cafe-host": "curie", "other": "fermat (dead)"}) is first   # not a host of this one
        later = shown({"cafe-host": "curie (dead)"})
    finally:
        store.close()
    assert first.units[0].host_name == "curie" and later.units[0].host_name == "curie (dead)"


def test_a_snapshot_carries_a_window_of_a_long_sweep_from_its_first_unit_not_done_and_counts_all_of_them(tmp_path):
    """A 10,000-unit sweep in every snapshot cost the node ~90 ms a push and the attached UI ~110 ms: the snapshot
    carries the SNAPSHOT_UNITS the screen shows, and the counts, progress and moves of all."""
    store = MasterStore(tmp_path / "master.sqlite", node_id="m")
    try:
        assignment = store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h", params={},
                                             units=[NewUnit(data={"i": i}, memory_bytes=1, cost=1.0) for i in range(1_000)])
        store.place_units([Placement(assignment, i, "cafe-host") for i in range(1_000)])
        store.accept_results([Delivery(assignment, i, 1, b"\x00", cpu_seconds=1.0) for i in range(300)])
        assert store.confirm_location(assignment, 999, epoch=2, host="other-host")   # moved there
        record = store.assignment(assignment)
        live = {f"{assignment}.{i}": 0.5 for i in range(300, 1_000)}

        def view(window):
            return assignment_view(record, now=record.created_at + 60, results_dir=tmp_path, live=live, window=window)

        whole, window = view(None), view(SNAPSHOT_UNITS)
        store.accept_results([Delivery(assignment, i, 1, b"\x00", cpu_seconds=1.0) for i in range(300, 999)])
        store.accept_results([Delivery(assignment, 999, 2, b"\x00", cpu_seconds=1.0)])
        all_done = assignment_view(store.assignment(assignment), now=0.0, results_dir=tmp_path, window=SNAPSHOT_UNITS)
    finally:
        store.close()
    assert len(whole.units) == 1_000 and whole.units_from == 0
    assert [u.index for u in window.units] == list(range(300, 300 + SNAPSHOT_UNITS))
    assert window.units == whole.units[300:300 + SNAPSHOT_UNITS]
    for shown in (whole, window):
        assert (shown.unit_count, shown.units_done, shown.moves) == (1_000, 300, 1)
    assert window.progress == whole.progress == (300 + 700 * 0.5) / 1_000
    assert window.eta_seconds == whole.eta_seconds
    assert window.units_from == 300
    assert (all_done.units_from, [u.index for u in all_done.units][-1], all_done.units_done) == (800, 999, 1_000)


def test_the_window_follows_a_sweep_and_is_never_short():
    def window(units, finished):
        return unit_window(["done"] * finished + ["queued"] * (units - finished), SNAPSHOT_UNITS)

    assert window(10_000, finished=0) == (0, SNAPSHOT_UNITS)
    assert window(10_000, finished=1_200) == (1_200, 1_200 + SNAPSHOT_UNITS)
    assert window(10_000, finished=9_950) == (10_000 - SNAPSHOT_UNITS, 10_000)   # the last ones, never fewer
    assert window(10_000, finished=10_000) == (10_000 - SNAPSHOT_UNITS, 10_000)
    assert window(50, finished=20) == (0, 50)
