"""A status reply's events are encoded once each, and the reply's bytes stay those of the plain encoding."""

from frost_core.api.queries import GetStatus, ListEvents, NodeStatus
from frost_core.api.snapshot import EventView, HostingView
from frost_core.node import event_cbor
from frost_core.node.control import plain_reply, reply_body
from frost_core.wire.codec import Encoded, decode_strict, encode

HOSTING = HostingView(state="hosting", reason="", paused_until=None, finishing=False, transfer_mode="neutral",
                      system_average=0.5, lower_threshold=0.3, upper_threshold=0.7, memory_pool_bytes=2**30,
                      memory_used_bytes=0, guest_cpus=2)


def status(events: tuple[EventView, ...]) -> NodeStatus:
    return NodeStatus(node_id="ab" * 16, name="desk", address="127.0.0.1:7946", state="hosting", hosting=HOSTING,
                      guests=(), peers=(), assignments=1, events=events)


def test_polling_status_encodes_each_event_once(monkeypatch):
    encoded = []
    real = event_cbor.to_plain
    monkeypatch.setattr(event_cbor, "to_plain", lambda hint, value: encoded.append(value) or real(hint, value))
    events = tuple(EventView(at=1000.0 + i, kind="completed", message=f"task-{i}: unit finished") for i in range(25))
    first = reply_body(GetStatus(), status(events[:20]))
    second = reply_body(GetStatus(), status(events[5:]))  # five new events since the last poll
    assert len(encoded) == 25
    assert first == encode(plain_reply(GetStatus(), status(events[:20])))
    assert decode_strict(second) == plain_reply(GetStatus(), status(events[5:]))


def test_listing_the_events_again_encodes_only_the_new_ones(monkeypatch):
    encoded = []
    real = event_cbor.to_plain
    monkeypatch.setattr(event_cbor, "to_plain", lambda hint, value: encoded.append(value) or real(hint, value))
    events = tuple(EventView(at=2000.0 + i, kind="assignment", message=f"assignment a{i} is done") for i in range(30))
    reply_body(ListEvents(), events[:20])
    body = reply_body(ListEvents(), events)
    assert len(encoded) == 30
    assert body == encode(plain_reply(ListEvents(), events))


def test_an_encoded_item_is_spliced_as_it_is():
    item = {"kind": "join", "at": 1.5}
    assert encode([Encoded(encode(item)), 3]) == encode([item, 3])
