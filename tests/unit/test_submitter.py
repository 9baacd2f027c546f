"""Every unit carries its submitter: in the master's store (old databases migrated), on the wire, in reports."""

import sqlite3

import pytest

from frost_core.api.errors import ProtocolError
from frost_core.cluster.messages import UnitOffer, UnitSpec, UnitStart, UnitStatus, UnitReport
from frost_core.master.store import MasterStore, NewUnit
from frost_core.node.identity import submitter_id
from frost_core.wire.codec import encode
from frost_core.wire.messages import decode_message, encode_message

NODE_ID = "ab" * 16
ALICE = f"alice@{NODE_ID}"


def submit(store, count=2, **kwargs):
    return store.create_assignment(
        plugin="pi", plugin_version="1", plugin_hash="h" * 64, params={},
        units=[NewUnit(data={"i": i}, memory_bytes=1 << 20, cost=1.0) for i in range(count)], **kwargs,
    )


def test_submitter_id_is_the_user_at_the_node_and_stable():
    first, second = submitter_id(NODE_ID), submitter_id(NODE_ID)
    assert first == second and first.endswith(f"@{NODE_ID}") and len(first) > len(NODE_ID) + 1


def test_units_carry_their_submitter_and_accepted_cpu_counts_as_its_usage(tmp_path):
    store = MasterStore(tmp_path / "node.sqlite", node_id=NODE_ID, submitter=ALICE)
    mine, theirs = submit(store), submit(store, submitter="bob@elsewhere")
    assert store.assignment(mine).submitter == ALICE
    assert {u.submitter for u in store.queued_units()} == {ALICE, "bob@elsewhere"}
    epoch = store.place_unit(theirs, 1, host="n1")
    assert store.accept_result(theirs, 1, epoch=epoch, result=b"\x01", cpu_seconds=12.5)
    [(who, host, cpu, at)] = store.accepted_cpu(since=0.0)
    assert (who, host, cpu) == ("bob@elsewhere", "n1", 12.5) and at > 0
    assert store.accepted_cpu(since=at + 1) == []


def test_a_database_from_before_submitters_is_migrated_to_this_nodes_submitter(tmp_path):
    path = tmp_path / "node.sqlite"
    store = MasterStore(path, node_id=NODE_ID)
    aid = submit(store)
    store.close()
    with sqlite3.connect(path) as db:   # as an older release left it: no submitter column at all
        db.execute("ALTER TABLE assignments DROP COLUMN submitter")
    store = MasterStore(path, node_id=NODE_ID, submitter=ALICE)
    assert store.assignment(aid).submitter == ALICE
    assert all(u.submitter == ALICE for u in store.queued_units())
    store.close()


def test_specs_offers_and_reports_carry_the_submitter_and_decode_strictly():
    spec = UnitSpec(task_id="a-1.0", assignment_id="a-1", master=NODE_ID, plugin_name="pi", plugin_version="1",
                    plugin_hash="h" * 64, unit=b"\xa0", memory_bytes=1, epoch=1, submitter=ALICE)
    for message in (UnitStart(spec=spec),
                    UnitOffer(task_id="a-1.0", plugin_hash="h", memory_bytes=1, state_bytes=0, submitter=ALICE,
                              usage=3.5),
                    UnitReport(units=(UnitStatus("a-1.0", 1, 0.5, submitter=ALICE),))):
        assert decode_message(message.CODE, encode_message(message)) == message
    offer = {"task_id": "a-1.0", "plugin_hash": "h", "memory_bytes": 1, "state_bytes": 0, "submitter": 7}
    with pytest.raises(ProtocolError):
        decode_message(UnitOffer.CODE, encode(offer))
    # An older master sends no submitter: the unit is nobody's in particular.
    del offer["submitter"]
    assert decode_message(UnitOffer.CODE, encode(offer)).submitter == ""
