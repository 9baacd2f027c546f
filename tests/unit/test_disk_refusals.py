"""A disk that refuses writes: each store says so with one error, changes nothing, and takes the write once it can.

A database is made "full" by capping its pages at what it has (SQLite then refuses exactly as a full disk
does, with SQLITE_FULL); tests/multinode/test_full_disk.py fills a real disk under two nodes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import cbor2
import pytest
import trio

from frost_core.api.errors import CheckpointError, StorageError
from frost_core.cluster.outbox import Outbox, owed_result
from frost_core.events import EventLog
from frost_core.ledger.book import Ledger
from frost_core.ledger import service as ledger_service
from frost_core.ledger.service import LedgerService
from frost_core.ledger.signing import NodeKey
from frost_core.master.store import Delivery, MasterStore, NewUnit
from frost_core.storage.disk_watch import MIB, REFUSAL_HOLD, ROOM_AGAIN, DiskWatch
from frost_core.storage.sqlite import open_durably, transaction
from frost_core.storage.staging import STAGE_FROM, StagingSink
from tests.full_disk import cap, connections_of, uncap
from tests.waiting import wait_until

NODE_ID = "cd" * 16


def test_a_refused_transaction_is_a_storage_error_naming_the_file_and_writes_nothing(tmp_path):
    path = tmp_path / "things.sqlite"
    db = open_durably(path, "CREATE TABLE IF NOT EXISTS things (blob BLOB);")
    cap(db)
    with pytest.raises(StorageError) as refused:
        with transaction(db, path) as writing:
            writing.execute("INSERT INTO things VALUES (?)", (bytes(64 << 10),))
    assert refused.value.message.startswith(f"could not write {path}: ") and "full" in refused.value.message
    assert not db.in_transaction
    assert db.execute("SELECT COUNT(*) FROM things").fetchone() == (0,)
    uncap(db)
    with transaction(db, path) as writing:
        writing.execute("INSERT INTO things VALUES (?)", (bytes(64 << 10),))
    assert db.execute("SELECT COUNT(*) FROM things").fetchone() == (1,)


def test_a_fault_of_the_code_is_not_taken_for_the_disk(tmp_path):
    path = tmp_path / "things.sqlite"
    db = open_durably(path, "CREATE TABLE IF NOT EXISTS things (blob BLOB);")
    with pytest.raises(sqlite3.OperationalError, match="no such column"):
        with transaction(db, path) as writing:
            writing.execute("UPDATE things SET missing = 1")
    assert not db.in_transaction


def test_results_the_disk_refused_leave_the_masters_units_running_in_memory_and_on_disk(tmp_path):
    """The unit index follows every commit; one that failed at the COMMIT itself used to keep the change, and
    a unit whose result was never stored counted as done: its assignment went to combine a missing result."""
    store = MasterStore(tmp_path / "node.sqlite", node_id=NODE_ID)
    aid = store.create_assignment(plugin="pi", plugin_version="1", plugin_hash="h" * 64, params={},
                                  units=[NewUnit(data={"i": 0}, memory_bytes=MIB, cost=1.0)])
    epoch = store.place_unit(aid, 0, host="n1")
    big = cbor2.dumps(bytes(256 << 10))   # (more pages than the file has to spare)
    cap(*connections_of(store))
    with pytest.raises(StorageError):
        store.accept_results([Delivery(aid, 0, epoch, big)])
    assert [(u.task_id, u.epoch) for u in store.running_units()] == [(f"{aid}.0", epoch)]
    assert store.unit(aid, 0).state == "running"
    assert store.combining_assignments() == []
    uncap(*connections_of(store))
    assert store.accept_results([Delivery(aid, 0, epoch, big)]) == [True]
    assert store.running_units() == [] and store.combining_assignments() == [aid]


def test_an_outbox_the_disk_refuses_says_so(tmp_path):
    outbox = Outbox(tmp_path / "outbox.sqlite")
    cap(outbox._db)
    with pytest.raises(StorageError, match="outbox.sqlite"):
        outbox.put(owed_result("m-1.0", "m", 1, bytes(256 << 10)))
    assert outbox.held() == []


async def test_runs_the_disk_refused_wait_in_memory_and_are_written_once_it_has_room(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite", node_id=NODE_ID)
    refused: list[StorageError] = []
    service = LedgerService(ledger, NodeKey.load_or_create(tmp_path / "node.key"), events=EventLog(), speed=lambda: 1.0, names=dict,
                            on_change=lambda: None, disk_refused=refused.append)
    cap(ledger._db)
    for i in range(2000):   # (enough rows to need a page more)
        service.gave(master="m" * 32, submitter="s", task_id=f"m-1.{i}", epoch=1, cpu_seconds=1.0)
    await service.write_unwritten()
    assert refused and ledger.runs() == []
    uncap(ledger._db)
    await service.write_unwritten()
    assert len(ledger.runs()) == 2000


class FakeDisk:
    def __init__(self) -> None:
        self.free = 10_000 * MIB
        self.now = 0.0


def watch_of(disk: FakeDisk, events: EventLog, floor_mib: int = 256) -> DiskWatch:
    return DiskWatch(Path("data"), events, floor=lambda: floor_mib * MIB, free_bytes=lambda folder: disk.free,
                     clock=lambda: disk.now)


def test_the_node_takes_no_guest_while_its_disk_is_under_the_floor_and_says_so_once():
    disk, events = FakeDisk(), EventLog()
    watch = watch_of(disk, events)
    assert watch.reason() is None
    disk.free, disk.now = 100 * MIB, 10.0
    assert "100 MiB free" in watch.reason()
    disk.free, disk.now = 90 * MIB, 20.0
    assert "90 MiB free" in watch.reason()
    disk.free, disk.now = 256 * MIB + ROOM_AGAIN // 2, 30.0   # over the floor, not by ROOM_AGAIN: no flip-flop
    assert f"until it has {256 + ROOM_AGAIN // MIB} MiB" in watch.reason()
    disk.free, disk.now = 1000 * MIB, 40.0
    assert watch.reason() is None
    disk.free, disk.now = 256 * MIB + ROOM_AGAIN // 2, 50.0   # over the floor: a node taking guests goes on
    assert watch.reason() is None
    told = [(e.severity, e.title, e.message) for e in events.recent()]
    assert [(severity, title) for severity, title, _ in told] == [("warning", "Disk full"), ("info", "")]
    assert "has room again" in told[1][2]


def test_a_refused_write_holds_the_node_back_until_the_disk_takes_writes_again():
    disk, events = FakeDisk(), EventLog()
    watch = watch_of(disk, events, floor_mib=0)   # (no floor: a read-only or failing disk shows no lack of space)
    watch.refused(StorageError("could not write node.sqlite: disk I/O error"))
    assert "node.sqlite" in watch.reason()
    disk.now = REFUSAL_HOLD - 1
    watch.refused(StorageError("could not write ledger.sqlite: disk I/O error"))   # (a store tried again: still no)
    disk.now = REFUSAL_HOLD + 1
    assert "ledger.sqlite" in watch.reason()
    disk.now = 2 * REFUSAL_HOLD
    assert watch.reason() is None
    assert len([e for e in events.recent() if e.title == "Disk full"]) == 1


async def test_the_ledger_tries_a_refused_write_again_by_itself(tmp_path, monkeypatch):
    """No run ends after the refusal: the ledger's writer comes back to the waiting runs on its own."""
    monkeypatch.setattr(ledger_service, "RETRY_AFTER", 0.05)   # (5 s in a node: this test need not wait that)
    ledger = Ledger(tmp_path / "ledger.sqlite", node_id=NODE_ID)
    refused: list[StorageError] = []
    service = LedgerService(ledger, NodeKey.load_or_create(tmp_path / "node.key"), events=EventLog(),
                            speed=lambda: 1.0, names=dict, on_change=lambda: None, disk_refused=refused.append)
    cap(ledger._db)
    for i in range(2000):
        service.gave(master="m" * 32, submitter="s", task_id=f"m-1.{i}", epoch=1, cpu_seconds=1.0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(service._write_as_they_come)
        await wait_until(lambda: len(refused) >= 2, timeout=10, what="the write refused, and tried again")
        assert ledger.runs() == []
        uncap(ledger._db)
        await wait_until(lambda: len(ledger.runs()) == 2000, timeout=10, what="the waiting runs written")
        nursery.cancel_scope.cancel()


async def test_a_big_checkpoint_whose_temp_file_the_disk_refused_is_received_whole_not_fatal():
    """The staging sink's temp file is opened when a big state starts to arrive; refused there, the state comes in
    whole and its write fails where every checkpoint's failure is handled (before, it stopped the guest's task
    and the node with it)."""
    def no_room(size: int):
        raise CheckpointError(f"checkpoint 3 of task m-1.0 was not written ({size} bytes: No space left on device)")

    sink = StagingSink(no_room, from_size=STAGE_FROM)
    await sink.begin(STAGE_FROM * 2)
    sink.filled(memoryview(b"state"))
    await sink.drained()
    assert sink.incoming is None
    await sink.abort()
