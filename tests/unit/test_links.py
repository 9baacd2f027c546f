"""Master and host calls over real authenticated loopback channels, and untrusted bytes thrown at them."""

from __future__ import annotations

import dataclasses

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.storage.checkpoints import CheckpointRecord, CheckpointStore
from frost_core.cluster import messages as cluster_messages
from frost_core.cluster.links import Links
from frost_core.cluster.messages import UnitOffer, UnitOfferReply, UnitSpec, UnitStatus, Verdict
from frost_core.cluster.replication import HeldReplicas, replica_holders
from frost_core.api.errors import CheckpointError, NodeUnavailableError, ProtocolError
from frost_core.policies.views import NodeView
from frost_core.wire import transport as transport_module
from frost_core.wire.pool import KEPT_PER_PEER
from frost_core.wire.transport import NetworkTransport, open_transport
from frost_core.wire.messages import Message, decode_message, encode_message
from frost_core.wire.security import ClusterKey

KEY = ClusterKey.generate()


class RecordingMaster:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    async def host_report(self, host, units, spent=()):
        self.calls.append(("report", host, units))
        return tuple(u.task_id for u in units if u.epoch < 2)

    async def host_result(self, host, task_id, epoch, result, cpu_seconds=0.0):
        self.calls.append(("result", host, task_id, epoch, result, cpu_seconds))
        return True

    async def host_return(self, host, task_id, epoch, record, progress=0.0, cpu_seconds=0.0):
        self.calls.append(("return", host, task_id, epoch, record, progress, cpu_seconds))
        return True

    async def host_failed(self, host, task_id, epoch, reason, retryable):
        self.calls.append(("failed", host, task_id, reason, retryable))

    async def host_moved(self, host, task_id, epoch, destination):
        return epoch > 1

    async def host_replica(self, host, record, progress=0.0, cpu_seconds=0.0):
        self.calls.append(("replica", host, record, progress, cpu_seconds))

    async def slot_kept(self, host):
        self.calls.append(("slot kept", host))
        return self.waiting

    waiting = False   # whether a unit waits at this master to take a kept CPU


class RecordingHost:
    def __init__(self) -> None:
        self.started: list[tuple[UnitSpec, CheckpointRecord | None]] = []
        self.withdrawn: list[tuple[str, tuple[str, ...]]] = []

    async def offer(self, source, offer):
        return UnitOfferReply(accepted=offer.memory_bytes < 100, reason="too big", available=1.5, guests=0,
                              free_memory=100)

    async def start(self, source, spec, record, *, moved=False):
        self.started.append((spec, record))
        return Verdict(ok=True)

    async def withdraw(self, source, task_ids):
        self.withdrawn.append((source, task_ids))

    async def move(self, task_id, destination):
        return Verdict(ok=False, reason=f"{task_id} does not run here")

    async def work_request(self, requester):
        return Verdict(ok=requester.available > 1, reason="no work")

    async def figures(self):
        return NodeView(node_id="b", available=2.5, guests=1, cpus=2, free_memory=7)


def record(state: bytes = b"state" * 1000, seq: int = 3) -> CheckpointRecord:
    return CheckpointRecord.seal(task_id="a-1.0", plugin_name="p", plugin_version="1", plugin_hash="h" * 64,
                                 unit_index=0, epoch=1, seq=seq, taken_at=1.0, state=state)


def spec() -> UnitSpec:
    return UnitSpec(task_id="a-1.0", assignment_id="a-1", master="m", plugin_name="p", plugin_version="1",
                    plugin_hash="h" * 64, unit=b"\xa0", memory_bytes=1, epoch=2)


async def serve_transports(nursery, keys: dict[str, ClusterKey]) -> dict[str, NetworkTransport]:
    """A loopback transport for each node name, with its cluster key, open until `nursery` is cancelled."""
    transports = {}

    async def run(name, task_status=trio.TASK_STATUS_IGNORED):
        async with open_transport(key=keys[name], node_id=name, host="127.0.0.1") as transport:
            transports[name] = transport
            task_status.started()
            await trio.sleep_forever()

    for name in keys:
        await nursery.start(run, name)
    return transports


async def pair(nursery, tmp, key_b: ClusterKey = KEY, host=None, checkpoints=None):
    """Two nodes, a and b, each with links; b answers with the recording master and host."""
    transports = await serve_transports(nursery, {"a": KEY, "b": key_b})
    addresses = {name: t.local_address for name, t in transports.items()}
    master, host = RecordingMaster(), host or RecordingHost()
    links_a = Links(node_id="a", address_of=addresses.get)
    links_a.bind(master=RecordingMaster(), host=RecordingHost(), keeper=HeldReplicas(tmp / "a"))
    links_a.install(transports["a"])
    links_b = Links(node_id="b", address_of=addresses.get, checkpoints=checkpoints)
    links_b.bind(master=master, host=host, keeper=HeldReplicas(tmp / "b"))
    links_b.install(transports["b"])
    return links_a, master, host


async def test_every_call_reaches_the_other_side_with_its_caller_and_bulk_bytes(tmp_path):
    async with trio.open_nursery() as nursery:
        links, master, host = await pair(nursery, tmp_path)
        remote_master, remote_host = links.master("b"), links.host("b")
        stop = await remote_master.host_report("ignored", (UnitStatus("a-1.0", 1, 0.5), UnitStatus("a-1.1", 2, 0.1)))
        assert stop == ("a-1.0",)
        assert await remote_master.host_result("ignored", "a-1.1", 2, b"r" * 300_000, 12.5)
        assert await remote_master.host_return("ignored", "a-1.0", 1, record(), 0.4, 6.0)
        await remote_master.host_replica("ignored", record(), 0.25, 3.5)
        await remote_master.host_failed("ignored", "a-1.0", 1, "plugin: boom", False)
        assert await remote_master.host_moved("ignored", "a-1.0", 2, "c")
        assert not await remote_master.slot_kept("ignored")   # nothing waits there to take the CPU
        master.waiting = True
        assert await remote_master.slot_kept("ignored")
        kinds = [call[0] for call in master.calls]
        assert kinds == ["report", "result", "return", "replica", "failed", "slot kept", "slot kept"]
        assert all(call[1] == "a" for call in master.calls), "the caller is the authenticated peer, not a claim"
        assert master.calls[1][4:] == (b"r" * 300_000, 12.5)
        assert master.calls[2][4:] == (record(), 0.4, 6.0)      # a returned unit says where its checkpoint stood
        assert master.calls[3][2:] == (record(), 0.25, 3.5)     # a replica says where its copy stood
        reply = await remote_host.offer("a", UnitOffer(task_id="a-1.0", plugin_hash="h", memory_bytes=500,
                                                       state_bytes=0))
        assert not reply.accepted and reply.reason == "too big"
        assert (await remote_host.start("a", spec(), record())).ok
        assert host.started == [(spec(), record())]
        await links.withdraw_offers("b", ("a-1.1", "a-1.2"))
        assert host.withdrawn == [("a", ("a-1.1", "a-1.2"))]
        assert not (await remote_host.move("a-1.0", "c")).ok
        assert await remote_host.figures() == NodeView(node_id="b", available=2.5, guests=1, cpus=2, free_memory=7)
        assert (await remote_host.work_request(NodeView(node_id="a", available=2.0, guests=0))).ok
        nursery.cancel_scope.cancel()


async def test_a_checkpoint_arrives_unverified_and_a_damaged_one_is_refused_where_it_is_kept(tmp_path):
    """The transfer leaves the SHA-256 to the store that makes the state durable (overlapping its fsync)."""
    async with trio.open_nursery() as nursery:
        links, _, host = await pair(nursery, tmp_path)
        assert (await links.host("b").start("a", spec(), record())).ok
        arrived = host.started[0][1]
        assert arrived == record() and not arrived.verified
        CheckpointStore(tmp_path / "kept").write(arrived)
        damaged = dataclasses.replace(record(), state=b"tampered" * 10)
        assert (await links.host("b").start("a", spec(), damaged)).ok
        with pytest.raises(CheckpointError, match="SHA-256"):
            CheckpointStore(tmp_path / "kept").write(host.started[1][1])
        assert CheckpointStore(tmp_path / "kept").latest("a-1.0") == record()
        nursery.cancel_scope.cancel()


async def test_a_node_of_another_cluster_cannot_call_and_a_dead_one_is_unavailable(tmp_path):
    async with trio.open_nursery() as nursery:
        links, _, host = await pair(nursery, tmp_path, key_b=ClusterKey.generate())
        with pytest.raises(NodeUnavailableError):
            await links.host("b").start("a", spec(), None)
        assert host.started == []
        with pytest.raises(NodeUnavailableError, match="not known"):
            await links.host("nobody").offer("a", UnitOffer(task_id="x.0", plugin_hash="h", memory_bytes=1,
                                                            state_bytes=0))
        nursery.cancel_scope.cancel()


async def test_a_holder_keeps_the_newest_copy_for_a_master_and_hands_it_back(tmp_path):
    async with trio.open_nursery() as nursery:
        links, master, _ = await pair(nursery, tmp_path)
        holder = links.keeper("b")
        older, newer = record(b"old" * 100), record(b"new" * 100, seq=4)
        await holder.keep("m", newer)
        await holder.keep("m", older)               # an older copy arriving late does not replace it
        assert await holder.fetch("a-1.0", 3) == newer
        assert await holder.fetch("a-1.0", 4) is None  # nothing newer than what the master has
        assert await holder.fetch("a-9.0", 0) is None
        assert master.calls == [], "copies held for others never reach this node's own master side"
        nursery.cancel_scope.cancel()


async def test_a_holder_that_left_for_another_cluster_holds_nothing_of_the_old_one(tmp_path):
    holder = HeldReplicas(tmp_path / "held")
    await holder.keep("m", record())
    assert await holder.fetch("a-1.0", 0) == record()
    holder.drop_all()
    assert await holder.fetch("a-1.0", 0) is None
    assert not any(path.is_file() for path in (tmp_path / "held").rglob("*"))


def count_handshakes(monkeypatch) -> list[str]:
    """The node ids whose handshakes a node accepted: one per channel opened to it."""
    accepted: list[str] = []
    accept = transport_module.accept_channel

    async def counting(*args, **kwargs):
        channel = await accept(*args, **kwargs)
        accepted.append(channel.peer_node_id)
        return channel

    monkeypatch.setattr(transport_module, "accept_channel", counting)
    return accepted


async def test_calls_to_a_peer_reuse_one_channel_and_each_gets_its_own_answer(tmp_path, monkeypatch):
    accepted = count_handshakes(monkeypatch)
    async with trio.open_nursery() as nursery:
        links, master, _ = await pair(nursery, tmp_path)
        for n in range(50):
            stop = await links.master("b").host_report("a", (UnitStatus(f"a-1.{n}", 1, 0.5),))
            assert stop == (f"a-1.{n}",)
        assert accepted == ["a"], "50 calls in turn: one connection and one handshake"
        answers: dict[int, tuple[str, ...]] = {}

        async def report(n: int) -> None:
            answers[n] = await links.master("b").host_report("a", (UnitStatus(f"a-2.{n}", 1, 0.5),))

        async with trio.open_nursery() as calls:  # at once: no answer ever reaches another call
            for n in range(12):
                calls.start_soon(report, n)
        assert answers == {n: (f"a-2.{n}",) for n in range(12)}
        assert len(master.calls) == 62
        assert links._transport is not None
        assert 1 <= links._transport.pool.idle(links._address_of("b")) <= KEPT_PER_PEER
        nursery.cancel_scope.cancel()


async def test_a_restarted_peer_is_reached_on_a_new_channel_and_a_dead_ones_channels_close(tmp_path, monkeypatch):
    accepted = count_handshakes(monkeypatch)
    addresses: dict[str, tuple[str, int]] = {}
    master = RecordingMaster()

    async def run_b(port: int, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with open_transport(key=KEY, node_id="b", host="127.0.0.1", port=port) as transport:
            links_b = Links(node_id="b", address_of=addresses.get)
            links_b.bind(master=master, host=RecordingHost(), keeper=HeldReplicas(tmp_path / "b"))
            links_b.install(transport)
            addresses["b"] = transport.local_address
            task_status.started()
            await trio.sleep_forever()

    async with trio.open_nursery() as nursery, open_transport(key=KEY, node_id="a", host="127.0.0.1") as a:
        links = Links(node_id="a", address_of=addresses.get)
        links.bind(master=RecordingMaster(), host=RecordingHost(), keeper=HeldReplicas(tmp_path / "a"))
        links.install(a)
        async with trio.open_nursery() as b_runs:
            await b_runs.start(run_b, 0)
            await links.master("b").host_failed("a", "a-1.0", 1, "first", False)
            b_runs.cancel_scope.cancel()  # b stops; a still keeps its channel to it
        assert a.pool.idle(addresses["b"]) == 1
        async with trio.open_nursery() as b_runs:
            await b_runs.start(run_b, addresses["b"][1])
            await links.master("b").host_failed("a", "a-1.0", 1, "after the restart", False)
            assert [call[3] for call in master.calls] == ["first", "after the restart"]
            assert accepted == ["a", "a"]
            links.forget(addresses["b"])  # b died or left
            assert a.pool.idle(addresses["b"]) == 0
            await links.master("b").host_failed("a", "a-1.0", 1, "third", False)
            assert accepted == ["a", "a", "a"]
            b_runs.cancel_scope.cancel()
        nursery.cancel_scope.cancel()


class StoringHost(RecordingHost):
    """Like the real host: makes the checkpoint durable in its store before it answers, unless it refuses."""

    def __init__(self, store: CheckpointStore) -> None:
        super().__init__()
        self.store, self.refuse = store, False

    async def start(self, source, spec, record, *, moved=False):
        if self.refuse:
            return Verdict(ok=False, reason="no room")
        await trio.to_thread.run_sync(self.store.write, record)
        return await super().start(source, spec, record, moved=moved)


async def test_a_moved_checkpoint_is_written_while_it_arrives_and_a_refused_one_leaves_nothing(tmp_path):
    store = CheckpointStore(tmp_path / "kept")
    host = StoringHost(store)
    async with trio.open_nursery() as nursery:
        links, _, _ = await pair(nursery, tmp_path, host=host, checkpoints=store)
        moved = record(state=bytes(range(256)) * 12_000)  # 3 MB: a dozen bulk chunks
        assert (await links.host("b").start("a", spec(), moved, moved=True)).ok
        arrived = host.started[0][1]
        assert arrived == moved and arrived.staged is not None, "written to the store while it arrived"
        assert store.latest("a-1.0") == moved
        host.refuse = True
        assert not (await links.host("b").start("a", spec(), record(b"newer" * 300_000, seq=4), moved=True)).ok
        assert sorted(p.name for p in (store.root / "a-1.0").iterdir()) == [f"{3:016d}.ckpt"]
        host.refuse = False
        damaged = dataclasses.replace(record(b"newer" * 300_000, seq=4), state=b"older" * 300_000)
        assert not (await links.host("b").start("a", spec(), damaged, moved=True)).ok
        assert store.latest("a-1.0") == moved, "a damaged transfer never replaces the copy that was there"
        assert sorted(p.name for p in (store.root / "a-1.0").iterdir()) == [f"{3:016d}.ckpt"]
        nursery.cancel_scope.cancel()


def test_holders_are_agreed_without_asking_and_never_the_master():
    nodes = [f"n{i}" for i in range(8)]
    holders = replica_holders("a-1.7", nodes, "n0", 2)
    assert len(holders) == 3 and "n0" not in holders
    assert replica_holders("a-1.7", reversed(nodes), "n0", 2) == holders      # the same on every node
    assert replica_holders("a-1.7", nodes, "n0", 0) == ()
    # A node leaving moves only the units it held.
    others = [n for n in nodes if n not in holders[:1]]
    assert set(replica_holders("a-1.7", others, "n0", 2)) >= set(holders[1:])


CLUSTER_MESSAGES = [cls for cls in vars(cluster_messages).values()
                    if isinstance(cls, type) and issubclass(cls, Message) and cls is not Message]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CLUSTER_MESSAGES), st.binary(max_size=600))
def test_arbitrary_bodies_are_refused_with_a_protocol_error(cls, body):
    try:
        decode_message(cls.CODE, body)
    except ProtocolError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.one_of(*(st.from_type(cls) for cls in CLUSTER_MESSAGES)))
def test_every_cluster_message_round_trips(message):
    try:
        body = encode_message(message)
    except ProtocolError:
        return  # over its size cap: refused before it is sent
    assert encode_message(decode_message(message.CODE, body)) == body  # (NaN != NaN, so compare bytes)
