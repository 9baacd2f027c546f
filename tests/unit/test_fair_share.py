"""Fair share: decayed usage, the queue's order by effective usage, and a host keeping a slot for the least used."""

import math
import re
import time

import pytest
import trio

from frost_core.cluster.host import Capacity, HostService, HostSettings
from frost_core.cluster.messages import UnitOffer
from frost_core.events import EventLog
from frost_core.ledger.book import Ledger
from frost_core.ledger.signing import NodeKey
from frost_core.ledger.summary import build_summary, sign_summary
from frost_core.master.store import MasterStore, NewUnit
from frost_core.master.usage import UsageBook
from frost_core.policies.fair_share import (
    CALL_INTERVAL, Demand, ShareSettings, decayed_usage, effective_usage, explain, favoured_over, master_to_call,
    note_demand, queue_order, submitter_usage, usage_by_submitter,
)

DAY = 86400.0
ON = ShareSettings()
OFF = ShareSettings(enabled=False)


def test_usage_halves_every_half_life():
    # 100 CPU-s a day ago + 10 CPU-s now, half-life one day: 100 * 1/2 + 10 = 60
    assert decayed_usage([(100.0, 0.0), (10.0, DAY)], now=DAY, half_life=DAY) == pytest.approx(60.0)
    # a week later the heavy day counts 100 * 2^-8 = 0.39
    assert usage_by_submitter([("a", 100.0, 0.0)], now=8 * DAY, half_life=DAY)["a"] == pytest.approx(100 / 256)


def test_weights_divide_usage():
    weights = {"big@n": 2.0}
    assert effective_usage("big@n", 10.0, weights) == 5.0
    assert effective_usage("other@n", 10.0, weights) == 10.0


def test_the_least_used_submitter_goes_first_keeping_first_come_within_each():
    queue = [("a", 0), ("a", 1), ("b", 0), ("c", 0), ("b", 1)]
    usage = {"a": 50.0, "b": 0.0, "c": 20.0}.__getitem__
    assert queue_order(queue, lambda u: u[0], usage, ON) == [("b", 0), ("b", 1), ("c", 0), ("a", 0), ("a", 1)]
    # Fair share off: first come, first served.
    assert queue_order(queue, lambda u: u[0], usage, OFF) == queue
    # A weight of 4 makes a's 50 count as 12.5: ahead of c's 20.
    weighted = ShareSettings(weights={"a": 4.0})
    assert [u[0] for u in queue_order(queue, lambda u: u[0], usage, weighted)] == ["b", "b", "a", "a", "c"]


def test_a_host_keeps_a_slot_for_a_less_used_submitter_with_units_waiting():
    demand = note_demand({}, "b", Demand(usage=0.0, queued=3, seen_at=10.0), now=10.0, settings=ON)
    demand = note_demand(demand, "a", Demand(usage=3600.0, queued=5, seen_at=11.0), now=11.0, settings=ON)
    assert favoured_over("a", 3600.0, demand, now=11.0, settings=ON) == "b"
    assert favoured_over("b", 0.0, demand, now=11.0, settings=ON) is None
    # Off, or once b's master has said nothing for the demand memory, or had nothing more waiting: a takes it.
    assert favoured_over("a", 3600.0, demand, now=11.0, settings=OFF) is None
    assert favoured_over("a", 3600.0, demand, now=10.0 + ON.demand_memory + 1, settings=ON) is None
    done = note_demand(demand, "b", Demand(usage=10.0, queued=0, seen_at=12.0), now=12.0, settings=ON)
    assert favoured_over("a", 3600.0, done, now=12.0, settings=ON) is None
    # Equal usage: whoever asks first.
    assert favoured_over("c", 0.0, demand, now=11.0, settings=ON) is None
    # Stale entries are dropped as offers come in.
    assert set(note_demand(demand, "c", Demand(0.0, 1, 100.0), now=100.0, settings=ON)) == {"c"}


def test_the_usage_book_counts_accepted_cpu_per_submitter_in_speed_units_and_adds_without_rereading(tmp_path):
    store = MasterStore(tmp_path / "node.sqlite", node_id="ab" * 16, submitter="alice@n")
    aid = store.create_assignment(plugin="pi", plugin_version="1", plugin_hash="h" * 64, params={},
                                  units=[NewUnit(data={}, memory_bytes=1, cost=1.0)])
    epoch = store.place_unit(aid, 0, host="n1")
    store.accept_result(aid, 0, epoch=epoch, result=b"\x01", cpu_seconds=40.0)
    speeds = {"n1": 4.5, "n2": 2.0}   # a CPU-second of n1 is 4.5 speed units (the ledger's unit too)
    book = UsageBook(store, speed_of=speeds.__getitem__)
    [(_, host, _, at)] = store.accepted_cpu(since=0.0)
    assert host == "n1" and book.usage("alice@n", at, DAY) == pytest.approx(40.0 * 4.5)
    store.close()   # later results come through add(): the store is not read again
    book.add("alice@n", "n2", 20.0, at + DAY)
    book.add("bob@m", "n1", 8.0, at + DAY)
    assert book.usage("alice@n", at + DAY, DAY) == pytest.approx(180.0 / 2 + 40.0)
    assert book.usage("bob@m", at + 2 * DAY, DAY) == pytest.approx(36.0 / 2)
    assert book.usage("nobody@x", at, DAY) == 0.0
    assert math.isfinite(book.usage("alice@n", at + 5000 * DAY, DAY))


def test_a_master_claiming_less_usage_than_the_signed_summaries_show_does_not_get_ahead(tmp_path):
    # Alice's master offers her unit saying she used nothing; but the hosts that served her signed, in their
    # ledger summaries, that they gave her an hour of speed units. Bob's master said he used 50 s.
    alice, bob = "alice@" + "a" * 32, "bob@" + "b" * 32
    now = time.time()
    ledger = Ledger(tmp_path / "ledger.sqlite", node_id="h" * 32)
    for peer, given in (("p" * 32, 2000.0), ("q" * 32, 1600.0)):
        summary = build_summary(peer, now, 4.5, {"a" * 32: (given, 0.0)}, [(alice, given, now - 60)])
        assert ledger.accept(sign_summary(NodeKey.load_or_create(tmp_path / f"{peer[0]}.key"), summary))
    counted_here = {bob: 50.0}   # this host's own master counts neither of them

    def usage_of(submitter):   # as the node believes it: its own count, floored by the signed figure
        return submitter_usage(counted_here.get(submitter, 0.0), ledger.decayed_usage(submitter, time.time(), DAY))

    free = {"cpus": 0}
    host = HostService(
        node_id="h" * 32, supervisor=None, links=None, plugin_source=None, outbox=None,  # type: ignore[arg-type]
        capacity=lambda: Capacity(True, "", cpus=free["cpus"], memory_pool_bytes=1 << 30, available=1.0),
        has_plugin=lambda plugin_hash: True, events=EventLog(), settings=HostSettings, on_change=lambda: None,
        alive=lambda: [], own_figures=None, answer_work_request=None, on_arrival=lambda task_id: None,  # type: ignore[arg-type]
        relocator=None, usage_of=usage_of,  # type: ignore[arg-type]
    )

    def offer(submitter, task_id, claimed):
        return trio.run(host.offer, "m", UnitOffer(task_id=task_id, plugin_hash="h", memory_bytes=1, state_bytes=0,
                                                  submitter=submitter, usage=claimed, queued=4))

    assert not offer(bob, "b-1.0", 50.0).accepted    # the host is full: it learns Bob waits
    free["cpus"] = 1                                 # a slot frees; Alice's master asks first, claiming 0 use
    reply = offer(alice, "a-1.0", 0.0)
    assert not reply.accepted and reply.reason.startswith("fair share: kept for bob@bbbbbbbb")
    # Her use as the signed summaries show it (3,600 s, counted as of their hour's middle: a day's half-life).
    assert re.search(r"over alice@aaaaaaaa \((3[56]\d\d CPU-s|1\.0 CPU-h)\)$", reply.reason), reply.reason
    assert offer(bob, "b-1.0", 50.0).accepted
    ledger.close()


def test_a_hosts_refusal_names_both_submitters_and_their_use():
    text = explain("alice@" + "a" * 32, 7200.0, "bob@" + "b" * 32, 12.0)
    assert text == "fair share: kept for bob@bbbbbbbb (12 CPU-s of recent use) over alice@aaaaaaaa (2.0 CPU-h)"


def test_a_host_keeping_a_cpu_for_a_submitter_tells_the_master_that_offered_it_at_most_every_call_interval():
    bob = Demand(usage=0.0, queued=5, seen_at=10.0, master="m-bob")
    assert master_to_call(bob, {}, now=10.0) == "m-bob"                                  # never told: now
    assert master_to_call(bob, {"m-bob": 10.0}, now=10.0 + CALL_INTERVAL / 2) is None  # just told: not again yet
    assert master_to_call(bob, {"m-bob": 10.0, "m-alice": 99.0}, now=10.0 + 2 * CALL_INTERVAL) == "m-bob"
    assert master_to_call(Demand(usage=0.0, queued=5, seen_at=10.0), {}, now=10.0) is None   # offered by nobody known
