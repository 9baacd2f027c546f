"""Every membership handler survives arbitrary field values: bad input costs a log line, never the node."""

import contextlib
import dataclasses
import random

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frost_core.api.errors import ProtocolError
from frost_core.membership.messages import (
    Ack,
    Announce,
    AnnounceReply,
    Leave,
    MemberEntry,
    Nack,
    Ping,
    PingReq,
    PushPull,
    PushPullReply,
    ResourceUpdate,
    entry_from_record,
)
from frost_core.membership.testing import open_sim_cluster
from frost_core.wire.messages import decode_message, encode_message

DATAGRAMS = [Ack, Nack, Ping, PingReq, Leave, Announce, AnnounceReply, ResourceUpdate, PushPullReply]
messages = st.one_of(*(st.from_type(cls) for cls in DATAGRAMS))
push_pulls = st.from_type(PushPull)


def run_mock(afn) -> None:
    trio.run(afn, clock=trio.testing.MockClock(autojump_threshold=0))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(messages, max_size=8), st.lists(push_pulls, max_size=3), st.randoms(use_true_random=False))
def test_arbitrary_messages_never_break_a_node(datagrams, requests, rng: random.Random):
    async def scenario() -> None:
        async with open_sim_cluster(rng.randrange(1000)) as cluster:
            a = await cluster.start_node()
            b = await cluster.start_node()
            await trio.sleep(3)
            for message in datagrams:
                await a.membership.handle_datagram(b.address, message)
            for request in requests:
                try:
                    reply = await a.membership.gossip.answer_push_pull(b.address, request)
                except ProtocolError:
                    continue
                decode_message(reply.CODE, encode_message(reply))  # the answer is itself valid
            await trio.sleep(20)
            # the node is still serving and still knows its peer and itself
            assert a.membership.member(a.node_id).is_active
            assert {a.node_id, b.node_id} <= {r.node_id for r in a.membership.members()}

    run_mock(scenario)


HOSTS = st.one_of(st.ip_addresses().map(str),
                  st.from_regex(r"[a-z0-9]([a-z0-9_-]{0,8}[a-z0-9])?(\.[a-z0-9]([a-z0-9_-]{0,8}[a-z0-9])?){0,2}",
                                fullmatch=True))
"""Hosts a record may carry: arbitrary text alone is refused at the host check, before the rest is looked at."""
ENTRIES = st.one_of(st.from_type(MemberEntry),
                    st.tuples(st.from_type(MemberEntry), HOSTS).map(lambda drawn: (*drawn[0][:2], drawn[1], *drawn[0][3:])))


@settings(max_examples=200, deadline=None)
@given(ENTRIES, st.binary(max_size=64))
def test_digests_and_entries_from_a_peer_are_checked(entry, digest: bytes):
    async def scenario() -> None:
        async with open_sim_cluster(1) as cluster:
            a = await cluster.start_node()
            with contextlib.suppress(ProtocolError):  # refused with a reason: the transport drops the link
                await a.membership.gossip.answer_push_pull(("10.1.1.1", 1), PushPull(sender=entry, digest=digest))

    run_mock(scenario)


def test_a_record_with_a_malformed_host_is_refused_and_never_stored(caplog):
    """A node advertising `desk..lan` stopped every peer that stored its record and then sent to it."""
    stranger = "c" * 32

    async def scenario() -> None:
        async with open_sim_cluster(1) as cluster:
            a = await cluster.start_node()
            b = await cluster.start_node()
            await trio.sleep(3)
            record = dataclasses.replace(a.membership.member(b.node_id), node_id=stranger, address=("desk..lan", 7946))
            entry = entry_from_record(record, trio.current_time())
            await a.membership.handle_datagram(b.address, ResourceUpdate(entries=(entry,)))
            await a.membership.handle_datagram(b.address, Announce(node=entry))
            with pytest.raises(ProtocolError, match="host"):
                await a.membership.gossip.answer_push_pull(b.address, PushPull(sender=entry, digest=None))
            await trio.sleep(20)
            assert a.membership.member(stranger) is None
            assert a.membership.member(b.node_id).is_active

    run_mock(scenario)
    assert any("bad membership message" in r.getMessage() and "desk..lan" in r.getMessage() for r in caplog.records)
