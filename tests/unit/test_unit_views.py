"""A master's view of its units: a re-queued unit shows no host (its last one may be dead)."""

from __future__ import annotations

from frost_core.master.store import MasterStore, NewUnit
from frost_core.node.views import assignment_view


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
