"""The master's SQLite store: atomic submits, exactly-once results, epochs, and survival of a kill."""

import sqlite3
import subprocess
import sys
import textwrap

import cbor2
import pytest

from frost_core.api.errors import FrostError
from frost_core.master import store as store_module
from frost_core.master.store import Delivery, MasterStore, NewUnit, Placement

NODE_ID = "ab" * 16
ROWS = 200   # units a screen lists of each assignment (`MasterStore.listing`)


def new_store(tmp_path):
    return MasterStore(tmp_path / "node.sqlite", node_id=NODE_ID)


def submit(store, count=3):
    return store.create_assignment(
        plugin="pi", plugin_version="1", plugin_hash="h" * 64, params={"samples": 10},
        units=[NewUnit(data={"i": i}, memory_bytes=1 << 20, cost=1.0) for i in range(count)],
    )


def test_ids_carry_the_master_and_units_start_queued(tmp_path):
    store = new_store(tmp_path)
    first, second = submit(store), submit(store)
    assert (first, second) == ("abababab-1", "abababab-2")
    assert [u.task_id for u in store.queued_units()][:3] == ["abababab-1.0", "abababab-1.1", "abababab-1.2"]


def test_the_first_complete_result_wins_whatever_copy_it_came_from_and_only_once(tmp_path):
    store = new_store(tmp_path)
    aid = submit(store, 1)
    first_epoch = store.place_unit(aid, 0, host="n1")
    assert store.requeue_unit(aid, 0, epoch=first_epoch, progress=0.0)           # its host was cut off: queued again
    second_epoch = store.place_unit(aid, 0, host="n2")
    assert second_epoch == first_epoch + 1
    # The cut-off copy finished first: its result is the unit's (results are the same wherever it ran).
    assert store.accept_result(aid, 0, epoch=first_epoch, result=cbor2.dumps(7))
    assert not store.accept_result(aid, 0, epoch=second_epoch, result=cbor2.dumps(7))
    assert not store.accept_result(aid, 0, epoch=first_epoch, result=cbor2.dumps(8))
    assert store.unit_results(aid) == [7]
    unit = store.assignment(aid).units[0]
    assert (unit.state, unit.moves) == ("done", 1)
    # The newer copy is stopped at its next report: the unit is done.
    assert not store.confirm_location(aid, 0, epoch=second_epoch, host="n2")


def test_failures_count_only_failed_runs(tmp_path):
    store = new_store(tmp_path)
    aid = submit(store, 1)
    epoch = store.place_unit(aid, 0, host="n1")
    store.requeue_unit(aid, 0, epoch=epoch, progress=0.0)
    epoch = store.place_unit(aid, 0, host="n1")
    store.requeue_unit(aid, 0, epoch=epoch, progress=0.0, error="crashed")
    assert store.assignment(aid).units[0].failures == 1


def test_combining_lists_assignments_whose_units_are_all_done(tmp_path):
    store = new_store(tmp_path)
    aid = submit(store, 2)
    for index in range(2):
        epoch = store.place_unit(aid, index, host="me")
        store.accept_result(aid, index, epoch=epoch, result=cbor2.dumps(index))
    assert store.combining_assignments() == [aid]
    store.finish_assignment(aid, data=b"out", media_type="text/plain", filename="out.txt")
    assert store.combining_assignments() == []
    assert store.result(aid) == (b"out", "text/plain", "out.txt")


def test_a_result_stored_by_a_worker_thread_reads_back_done_while_the_loop_is_in_the_middle_of_a_read(tmp_path):
    # Seen on a node polled by `status` as it finished an assignment: the export read the result back as
    # "running" and the node stopped. A read the loop has in progress on its connection (here a listing
    # half fetched) holds that connection's snapshot; the export must read past it.
    store = new_store(tmp_path)
    first, second = submit(store, 1), submit(store, 1)
    listing = store._db.execute("SELECT id FROM assignments")
    assert listing.fetchone() == (first,)
    assert store.finish_assignment(second, data=b"42", media_type="text/plain", filename="pi.txt")
    assert store.result(second) == (b"42", "text/plain", "pi.txt")
    assert [files for files in store.unit_files(second)] == [{}]
    assert listing.fetchone() == (second,)


def test_a_result_that_comes_after_its_assignment_was_cancelled_is_not_stored(tmp_path):
    store = new_store(tmp_path)
    aid = submit(store, 1)
    store.cancel_assignment(aid)
    assert not store.finish_assignment(aid, data=b"late", media_type="text/plain", filename="late.txt")
    assert store.assignment(aid).state == "cancelled"
    with pytest.raises(FrostError, match=f"^assignment {aid} cancelled: it has no result$"):   # not "yet"
        store.result(aid)


def test_an_assignment_with_a_unit_failed_for_good_is_never_combined_even_across_a_restart(tmp_path):
    store = new_store(tmp_path)
    aid = submit(store, 2)
    epoch = store.place_unit(aid, 0, host="me")
    store.accept_result(aid, 0, epoch=epoch, result=cbor2.dumps(0))
    epoch = store.place_unit(aid, 1, host="me")
    assert store.fail_unit(aid, 1, epoch=epoch, error="boom")   # a crash here: the assignment's failure unstored
    assert store.combining_assignments() == []
    assert new_store(tmp_path).combining_assignments() == []


def test_a_failed_assignment_shows_its_culprit_failed_and_the_units_it_stopped_cancelled(tmp_path):
    """The owner looking for why a sweep failed finds one failed row with its error; what was done stays done."""
    store = new_store(tmp_path)
    by_plugin, by_checking = submit(store, 4), submit(store, 2)
    epoch = store.place_unit(by_plugin, 0, host="me")
    store.accept_result(by_plugin, 0, epoch=epoch, result=cbor2.dumps(0))
    store.place_unit(by_plugin, 2, host="me")                      # running when unit 1 failed
    assert store.fail_unit(by_plugin, 1, epoch=store.place_unit(by_plugin, 1, host="me"), error="step() raised")
    store.fail_assignment(by_plugin, "unit 1 failed: step() raised")
    store.place_unit(by_checking, 1, host="me")
    store.fail_assignment(by_checking, "unit 1: no two hosts agreed", failed_unit=(1, "no two hosts agreed"))
    assert [(u.state, u.error, u.failures) for u in store.assignment(by_plugin).units] == [
        ("done", None, 0), ("failed", "step() raised", 1), ("cancelled", None, 0), ("cancelled", None, 0)]
    assert [(u.state, u.error) for u in new_store(tmp_path).assignment(by_checking).units] == [
        ("cancelled", None), ("failed", "no two hosts agreed")]


def test_a_stopped_assignments_units_keep_how_far_they_got_not_zero(tmp_path):
    """A cancelled or failed sweep's rows show where each placed unit stood when it stopped (its host's last report),
    across a restart; a unit that never ran stays at 0 and one done stays done."""
    store = new_store(tmp_path)
    cancelled, failed = submit(store, 3), submit(store, 3)
    for aid in (cancelled, failed):
        store.place_unit(aid, 0, host="me")
        store.place_unit(aid, 1, host="me")
    store.cancel_assignment(cancelled, standing={0: 0.4, 1: 0.75})
    store.fail_assignment(failed, "unit 1 failed: step() raised", failed_unit=(1, "step() raised"), standing={0: 0.3})
    again = new_store(tmp_path)
    assert [(u.state, u.progress) for u in again.assignment(cancelled).units] == [
        ("cancelled", 0.4), ("cancelled", 0.75), ("cancelled", 0.0)]
    assert [(u.state, u.progress) for u in again.assignment(failed).units] == [
        ("cancelled", 0.3), ("failed", 0.0), ("cancelled", 0.0)]


def test_an_assignment_commits_the_same_whatever_its_size_and_none_on_the_event_loops_connection(tmp_path, monkeypatch):
    """Its creation, its last result's transaction (which also marks it combining) and its finish: the number of
    commits does not grow with its units, and none is on the connection the node's event loop uses, whose fsync
    the node would wait for (the others run in a worker thread, on the store's second connection)."""
    commits: list[list[int]] = []
    opened = store_module.open_durably

    def open_counted(path, schema):
        db = opened(path, schema)
        counted = [0]
        commits.append(counted)
        db.set_trace_callback(lambda sql: counted.__setitem__(0, counted[0] + (sql == "COMMIT")))
        return db

    monkeypatch.setattr(store_module, "open_durably", open_counted)
    for count in (1, 30):
        commits.clear()
        store = MasterStore(tmp_path / f"{count}.sqlite", node_id=NODE_ID)
        loop_connection, batch_connection, read_connection = commits   # opened in this order
        loop_connection[0] = batch_connection[0] = 0
        aid = submit(store, count)
        epochs = store.place_units([Placement(aid, index, "me") for index in range(count)])
        store.accept_results([Delivery(aid, index, epoch, cbor2.dumps(index)) for index, epoch in enumerate(epochs)])
        assert store.assignment(aid).state == "combining"
        for ready in store.combining_assignments():
            store.mark_combining(ready)
        store.finish_assignment(aid, data=b"out", media_type="text/plain", filename="out.txt")
        assert store.assignment(aid).state == "done"
        assert (loop_connection[0], batch_connection[0]) == (0, 4), count   # create, place, results, finish
        assert read_connection[0] == 0, count


def test_intents_survive_reopening(tmp_path):
    new_store(tmp_path).set_intents({"paused_until": 1234.5, "paused": True})
    assert (new_store(tmp_path).intent("paused_until"), new_store(tmp_path).intent("paused")) == (1234.5, True)


def test_kill_9_mid_write_keeps_every_acknowledged_result(tmp_path):
    """A process accepts results and prints each acknowledgement; we kill it mid-stream."""
    script = textwrap.dedent(f"""
        import sys, cbor2
        from pathlib import Path
        from frost_core.master.store import MasterStore, NewUnit
        store = MasterStore(Path({str(tmp_path / 'node.sqlite')!r}), node_id={NODE_ID!r})
        aid = store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h", params={{}},
            units=[NewUnit(data={{}}, memory_bytes=1, cost=1.0) for _ in range(100000)])
        for i in range(100000):
            epoch = store.place_unit(aid, i, host="me")
            store.accept_result(aid, i, epoch=epoch, result=cbor2.dumps(i))
            print(i, flush=True)
    """)
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) as process:
        acknowledged = -1
        for line in process.stdout:
            acknowledged = int(line)
            if acknowledged >= 300:
                process.kill()
                break
        process.wait()
    store = new_store(tmp_path)
    (record,) = store.assignments()
    done = [u.index for u in record.units if u.state == "done"]
    assert done == list(range(len(done))) and len(done) > acknowledged
    assert len(store.requeue_hosted_by("me")) <= 1  # at most the unit that was mid-flight


def test_listing_follows_every_write(tmp_path):
    """listing() is cached for the snapshot loop; a write must never leave it stale."""
    store = new_store(tmp_path)
    aid = submit(store, 1)
    assert [u.state for u in store.listing(ROWS)[0].record.units] == ["queued"]
    epoch = store.place_unit(aid, 0, host="me")
    assert [u.state for u in store.listing(ROWS)[0].record.units] == ["running"]
    store.accept_result(aid, 0, epoch=epoch, result=cbor2.dumps(1))
    store.mark_combining(aid)
    assert store.listing(ROWS)[0].record.state == "combining"
    assert [u.state for u in store.listing(ROWS)[0].record.units] == ["done"]


def test_a_move_the_master_missed_is_adopted_and_the_same_epoch_elsewhere_loses(tmp_path):
    store = new_store(tmp_path)
    aid = submit(store, 1)
    epoch = store.place_unit(aid, 0, host="n1")
    # n1 moved the unit to n2 under epoch+1 while the master was out of reach: n2's report wins.
    assert store.confirm_location(aid, 0, epoch=epoch + 1, host="n2")
    assert not store.confirm_location(aid, 0, epoch=epoch, host="n1")          # the old copy stops
    unit = store.unit(aid, 0)
    assert (unit.host, unit.epoch, unit.moves) == ("n2", epoch + 1, 1)
    # Two copies under one epoch (a recovery raced a move): the stored host is the one that goes on.
    assert not store.confirm_location(aid, 0, epoch=epoch + 1, host="n3")
    assert store.confirm_location(aid, 0, epoch=epoch + 1, host="n2")


def test_a_result_from_a_newer_epoch_than_known_is_accepted_once(tmp_path):
    store = new_store(tmp_path)
    aid = submit(store, 1)
    epoch = store.place_unit(aid, 0, host="n1")
    assert store.accept_result(aid, 0, epoch=epoch + 3, result=cbor2.dumps("moved twice"))
    assert not store.accept_result(aid, 0, epoch=epoch + 3, result=cbor2.dumps("again"))
    assert store.unit_results(aid) == ["moved twice"]


def test_no_result_is_taken_for_a_cancelled_assignment(tmp_path):
    store = new_store(tmp_path)
    aid = submit(store, 1)
    epoch = store.place_unit(aid, 0, host="n1")
    store.cancel_assignment(aid)
    assert not store.accept_result(aid, 0, epoch=epoch, result=cbor2.dumps(1))


def test_a_given_up_copy_is_taken_back_while_its_unit_waits_in_the_queue_under_its_epoch(tmp_path):
    store = new_store(tmp_path)
    aid = submit(store, 1)
    epoch = store.place_unit(aid, 0, host="n1")
    assert store.requeue_unit(aid, 0, epoch=epoch, progress=0.0)
    assert not store.readopt(aid, 0, epoch=epoch, host="n2")       # another host's word is not enough
    assert store.readopt(aid, 0, epoch=epoch, host="n1")
    assert store.confirm_location(aid, 0, epoch=epoch, host="n1") and not store.queued_units()
    assert store.requeue_unit(aid, 0, epoch=epoch, progress=0.0)
    store.place_unit(aid, 0, host="n2")                               # placed again: the old copy is stale
    assert not store.readopt(aid, 0, epoch=epoch, host="n1")


def test_waste_is_summed_by_reason_and_can_be_taken_back(tmp_path):
    store = new_store(tmp_path)
    aid = submit(store, 2)
    store.add_waste(aid, 0, epoch=1, reason="redone since checkpoint", seconds=4.0)
    store.add_waste(aid, 1, epoch=1, reason="redone since checkpoint", seconds=2.0)
    store.add_waste(aid, 1, epoch=2, reason="superseded copy", seconds=1.5)
    record = store.assignment(aid)
    assert record.waste == (("redone since checkpoint", 6.0), ("superseded copy", 1.5))
    assert record.wasted_seconds == 7.5
    store.withdraw_waste(aid, 1, reason="redone since checkpoint")   # unit 1's lost copy came back with the work
    assert store.assignment(aid).waste == (("redone since checkpoint", 4.0), ("superseded copy", 1.5))


def test_a_queued_unit_still_takes_the_result_of_its_last_epoch(tmp_path):
    store = new_store(tmp_path)
    aid = submit(store, 1)
    epoch = store.place_unit(aid, 0, host="n1")
    assert store.requeue_unit(aid, 0, epoch=epoch, progress=0.0)     # its host went silent: queued again
    assert store.accept_result(aid, 0, epoch=epoch, result=cbor2.dumps(1))   # ...but it came back with the work
    assert store.unit(aid, 0).state == "done"
    assert not store.queued_units()


def test_a_restart_requeues_only_the_units_this_machine_ran(tmp_path):
    store = new_store(tmp_path)
    aid = submit(store, 2)
    store.place_unit(aid, 0, host=NODE_ID)
    store.place_unit(aid, 1, host="elsewhere")
    assert [u.task_id for u in store.requeue_hosted_by(NODE_ID)] == [f"{aid}.0"]
    assert [u.state for u in store.assignment(aid).units] == ["queued", "running"]


def test_a_cancelled_assignment_accepts_no_result(tmp_path):
    store = new_store(tmp_path)
    aid = submit(store, 1)
    epoch = store.place_unit(aid, 0, host="n1")
    store.cancel_assignment(aid)
    assert not store.accept_result(aid, 0, epoch=epoch, result=cbor2.dumps(1))
    assert not store.confirm_location(aid, 0, epoch=epoch, host="n1")


def test_a_batch_that_fails_leaves_the_index_as_the_database_is(tmp_path, monkeypatch):
    store = new_store(tmp_path)
    aid = submit(store)
    first, second = store.place_unit(aid, 0, host="n1"), store.place_unit(aid, 1, host="n1")
    clock = iter([1.0])   # the second result's time fails: after the first one's update, before COMMIT
    monkeypatch.setattr(store_module.time, "time", lambda: next(clock))
    with pytest.raises(StopIteration):
        store.accept_results([Delivery(aid, 0, first, cbor2.dumps(1)), Delivery(aid, 1, second, cbor2.dumps(2))])
    assert sorted(p.task_id for p in store.running_units()) == [f"{aid}.0", f"{aid}.1"]
    assert [store.unit(aid, i).state for i in (0, 1)] == ["running", "running"]
    store.close()


def test_a_report_of_the_current_copy_writes_nothing_so_the_listing_is_not_read_again(tmp_path):
    store = new_store(tmp_path)
    aid = submit(store)
    epoch = store.place_unit(aid, 0, host="n1")
    listed = store.listing(ROWS)
    assert store.confirm_location(aid, 0, epoch=epoch, host="n1")
    assert not store.confirm_location(aid, 0, epoch=epoch, host="n2")
    assert store.listing(ROWS)[0] is listed[0], "a heartbeat of every running unit re-read every assignment"
    assert store.confirm_location(aid, 0, epoch=epoch + 1, host="n2")   # a move it missed: adopted, and listed
    assert store.listing(ROWS)[0].record.units[0].host == "n2"


def test_a_database_with_results_in_their_rows_moves_them_out_on_opening_and_loses_no_byte(tmp_path):
    """Schema 1 kept a unit's result and files in its `units` row and the combined result in its `assignments`
    row; opening such a database moves them to their own tables in one transaction (listings then no longer walk
    them). The old layout is rebuilt here from a new database: the move goes by column names, not positions."""
    path = tmp_path / "node.sqlite"
    store = new_store(tmp_path)
    aid = submit(store, 2)
    store.place_units([Placement(aid, 0, "n1"), Placement(aid, 1, "n2")])
    results = [cbor2.dumps(bytes(range(256)) * 4096), cbor2.dumps({"tile": 1})]   # 1 MiB, and a small one
    store.accept_results([Delivery(aid, 0, 1, results[0], {"out.png": b"\x89PNG" * 1000}), Delivery(aid, 1, 1, results[1])])
    assert store.finish_assignment(aid, data=b"combined " * 200_000, media_type="image/png", filename="r.png")
    store.close()
    with sqlite3.connect(path) as db:
        for table in ("units", "assignments"):
            db.execute(f"ALTER TABLE {table} ADD COLUMN result BLOB")
        db.execute("ALTER TABLE units ADD COLUMN files BLOB")
        db.execute("UPDATE units SET result = (SELECT r.result FROM unit_results r WHERE r.assignment_id = units.assignment_id"
                   " AND r.idx = units.idx), files = (SELECT r.files FROM unit_results r"
                   " WHERE r.assignment_id = units.assignment_id AND r.idx = units.idx)")
        db.execute("UPDATE assignments SET result = (SELECT r.result FROM assignment_results r WHERE r.id = assignments.id)")
        db.execute("DROP TABLE unit_results")
        db.execute("DROP TABLE assignment_results")
        db.execute("PRAGMA user_version = 1")
    db.close()

    store = new_store(tmp_path)
    try:
        assert store.unit_results(aid) == [bytes(range(256)) * 4096, {"tile": 1}]
        assert list(store.unit_files(aid)) == [{"out.png": b"\x89PNG" * 1000}, {}]
        assert store.result(aid) == (b"combined " * 200_000, "image/png", "r.png")
        assert store.holds_result(aid, 0, results[0])
        assert [u.state for u in store.assignment(aid).units] == ["done", "done"]
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM units WHERE result IS NOT NULL OR files IS NOT NULL").fetchone() == (0,)
        assert db.execute("SELECT COUNT(*) FROM assignments WHERE result IS NOT NULL").fetchone() == (0,)
        assert db.execute("PRAGMA user_version").fetchone() == (store_module.SCHEMA_VERSION,)
    db.close()


def test_a_finished_assignment_is_listed_as_it_is_after_its_late_copies_waste_comes_and_goes(tmp_path):
    """A finished assignment is read once and kept; what can still change it (the work a late copy threw away,
    and taking that back) shows in the very next listing, and a cancelled one lists as cancelled."""
    store = new_store(tmp_path)
    done, cancelled = submit(store, 2), submit(store, 1)
    store.place_units([Placement(done, 0, "n1"), Placement(done, 1, "n2")])
    store.accept_results([Delivery(done, 0, 1, cbor2.dumps(0)), Delivery(done, 1, 1, cbor2.dumps(1))])
    assert store.finish_assignment(done, data=b"r", media_type="text/plain", filename="r.txt")
    def listed():
        return [listed.record for listed in store.listing(ROWS)]

    assert [(a.id, a.state) for a in listed()] == [(done, "done"), (cancelled, "running")]
    kept = listed()[0]
    store.cancel_assignment(cancelled)
    assert [(a.id, a.state, a.waste) for a in listed()] == [(done, "done", ()), (cancelled, "cancelled", ())]
    assert listed()[0] is kept                                     # read once
    store.add_waste(done, 1, epoch=1, reason="superseded copy", seconds=3.0)   # its other copy stopped late
    assert listed()[0].waste == (("superseded copy", 3.0),)
    store.withdraw_waste(done, 1, reason="superseded copy")
    assert listed()[0].waste == ()
    assert listed()[0] == store.assignment(done) == store.assignments()[0]


def _vm_steps(store, call) -> int:
    """SQLite VM steps `call()` takes on the store's connections: work, counted the same on any machine."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    connections = (store._db, store._batches)
    for db in connections:
        db.set_progress_handler(count, 1)
    call()
    for db in connections:
        db.set_progress_handler(None, 1)
    return steps


def test_a_checked_units_second_copy_and_the_listing_take_the_same_work_per_unit_at_100_and_2000_units(tmp_path):
    """Checked units keep each host's copy; finding a unit's copies went through every copy kept so far (a listing
    of 10,000 checked units took 15 s, bench/checked_units_cost.py)."""
    def work(units):
        store = MasterStore(tmp_path / f"{units}.sqlite", node_id=NODE_ID)
        try:
            aid = store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h" * 64, params={}, verify=1.0,
                                          units=[NewUnit(data={}, memory_bytes=1, cost=1.0) for _ in range(units)],
                                          checked=frozenset(range(units)))
            store.place_units([Placement(aid, i, "host-a") for i in range(units)])
            for i in range(units):
                store.record_copy(aid, i, epoch=1, host="host-a", result=b"r%d" % i)
            store.place_units([Placement(aid, i, "host-b") for i in range(units)])
            second = _vm_steps(store, lambda: store.record_copy(aid, units - 1, epoch=2, host="host-b",
                                                                result=b"r%d" % (units - 1)))
            listing = _vm_steps(store, store.assignments)
            assert store.unit(aid, units - 1).state == "done"
        finally:
            store.close()
        return second, listing / units

    small, large = work(100), work(2000)
    assert large[0] <= small[0] + 100, f"VM steps for a second copy: {small[0]} at 100 units, {large[0]} at 2,000"
    assert large[1] <= 1.2 * small[1], f"VM steps per unit listed: {small[1]:.0f} at 100 units, {large[1]:.0f} at 2,000"


def test_a_running_sweeps_listing_and_a_search_for_a_units_number_take_the_same_work_at_1000_and_20000_units(tmp_path):
    """The node lists a running sweep for an attached UI up to twice a second, on its event loop: counting its units
    and finding the 200 it shows walked every unit (60 ms at 100,000 units, growing with the sweep). A search for
    a unit's number (`/` 250 on the Assignments tab, every 2 s while shown) read every unit's row too."""
    def work(units):
        store = MasterStore(tmp_path / f"{units}.sqlite", node_id=NODE_ID)
        try:
            aid = store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h" * 64, params={},
                                          units=[NewUnit(data={}, memory_bytes=1, cost=1.0) for _ in range(units)])
            third = units // 3
            store.place_units([Placement(aid, i, "host-a") for i in range(third + 4)])
            store.accept_results([Delivery(aid, i, 1, b"\x00") for i in range(third) if i != 7])
            store.fail_unit(aid, third, epoch=1, error="broke")
            store.place_units([Placement(aid, units - 1, "host-b")])    # the last one, placed out of order
            steps = (_vm_steps(store, lambda: store.listing(ROWS)),
                     _vm_steps(store, lambda: store.searchable_units(aid, 7)))
            (listed,) = store.listing(ROWS)
            assert store.searchable_units(aid, 7) == [(7, "running", "host-a", None, 0)]
        finally:
            store.close()
        assert (listed.tally.count, listed.tally.done, listed.tally.failed) == (units, third - 1, 1)
        shown = [unit.index for unit in listed.record.units]
        assert shown == [7, *range(third, third + ROWS - 2), units - 1]   # running, then waiting and failed
        return steps

    small, large = work(1_000), work(20_000)
    assert large[0] <= small[0] * 1.1, f"VM steps for a listing: {small[0]} at 1,000 units, {large[0]} at 20,000"
    assert large[1] <= small[1] * 1.1, f"VM steps to find unit 7: {small[1]} at 1,000 units, {large[1]} at 20,000"


def test_a_database_from_before_the_tallies_is_counted_when_opened_and_counts_on(tmp_path):
    """The tallies are made from the units already stored the first time a node of this version opens a database;
    an assignment's counts then follow its units, whoever writes them."""
    store = new_store(tmp_path)
    aid, other = submit(store, 4), submit(store, 2)
    store.place_units([Placement(aid, i, "n1") for i in range(3)] + [Placement(other, 0, "n1")])
    store.accept_results([Delivery(aid, 0, 1, b"\x00"), Delivery(other, 0, 1, b"\x00")])
    store.fail_unit(aid, 1, epoch=1, error="broke")
    assert store.confirm_location(aid, 2, epoch=2, host="n2")
    store.close()
    with sqlite3.connect(tmp_path / "node.sqlite") as db:
        db.execute("DROP TRIGGER unit_recounted")
        db.execute("DROP TABLE unit_tallies")
    db.close()

    store = new_store(tmp_path)
    try:
        before = {listed.record.id: listed.tally for listed in store.listing(ROWS)}
        store.accept_results([Delivery(aid, 2, 2, b"\x00")])
        store.cancel_assignment(other)
        after = {listed.record.id: listed.tally for listed in store.listing(ROWS)}
    finally:
        store.close()
    assert [(t.count, t.done, t.failed, t.queued, t.moves, t.running) for t in before.values()] == [
        (4, 1, 1, 1, 1, ((2, 0.0),)), (2, 1, 0, 1, 0, ())]
    assert [(t.count, t.done, t.failed, t.queued, t.moves, t.running) for t in after.values()] == [
        (4, 2, 1, 1, 1, ()), (2, 1, 1, 0, 0, ())]


def test_a_running_assignments_listing_follows_every_change_of_its_units(tmp_path):
    """Each listing of a running sweep shows its units as they are now, however often it is listed in between
    (the store keeps its last listing until the next write)."""
    store = new_store(tmp_path)
    aid = submit(store, 3)

    def shown():
        (listed,) = store.listing(ROWS)
        return [(u.state, u.host, u.epoch, u.failures) for u in listed.record.units]

    assert shown() == [("queued", "", 0, 0)] * 3
    first, _ = store.place_unit(aid, 0, host="n1"), store.place_unit(aid, 1, host="n2")
    assert shown() == [("running", "n1", first, 0), ("running", "n2", 1, 0), ("queued", "", 0, 0)]
    assert store.requeue_unit(aid, 0, epoch=first, progress=0.0, error="host died")
    assert store.accept_result(aid, 1, epoch=1, result=cbor2.dumps(1))
    assert shown()[:2] == [("queued", "n1", first, 1), ("done", "n2", 1, 0)]
    assert shown() == shown()
