"""Gang messages on the wire: every kind round-trips through the real codec; malformed ones are refused."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.api.errors import ProtocolError
from frost_core.cluster.gang_site import (
    BarrierReport,
    CheckpointReport,
    GangCheck,
    Mail,
    MailAck,
    MailBounced,
    ReleaseStep,
    StartMember,
    StopMember,
    TakeCheckpoint,
)
from frost_core.cluster.gang_wire import gang_from_wire, gang_to_wire, has_bulk
from frost_core.cluster.messages import (
    GANG_MESSAGES,
    GangHostState,
    GangLost,
    GangMail,
    GangRelease,
    GangReport,
    GangSpec,
    GangStart,
    WireCheck,
)
from frost_core.plugin.gang import MemberCheckpoint
from frost_core.wire.codec import encode
from frost_core.wire.messages import decode_message, encode_message

SPEC = GangSpec("a1", "n0", "heat-diffusion", "1", "ab" * 32, encode({"members": "3"}), 64 << 20)
MAIL = Mail("g", 2, 5, 1, 0, ([1, 2, 3], {"halo": b"\x00\x01"}), "host-b", routed=True)
IMAGE = MemberCheckpoint(1, 4, {"rows": [[1, 2], [3, 4]]}, {0: [[9]], 2: [[8]]}).to_bytes()

EVERY_KIND = [
    StartMember("g", 1, 3, 2, 0, None),
    StartMember("g", 2, 3, 3, 4, IMAGE),
    ReleaseStep("g", 0, 2, 6, frozenset({1, 2})),
    ReleaseStep("g", 0, 2, 6, frozenset(), GangCheck(frozenset({"h1", "h0", "h2"}), 1.0, 0.25)),
    TakeCheckpoint("g", 2, 2, 6, frozenset({0, 1})),
    StopMember("g", 1, 3),
    StopMember("g", 1, 3, "host-c"),
    BarrierReport("g", 2, 1, 5, frozenset({0, 2}), None, False),
    BarrierReport("g", 2, 1, 9, frozenset(), True, True, {"rows": [[1, 2]], "tail": None}),
    CheckpointReport("g", 2, 1, 4, IMAGE),
    MAIL,
    MailAck("g", (2, 5, 1, 0), "host-a"),
    MailBounced(MAIL),
    GangLost("g", 2, 3, "evicting"),
    GangLost("g", 2, 3, "superstep 4: rank 2 sent to rank 3", plugin_fault=True),
    GangHostState("g", 2, 3, "held", "is held by its owner (cpu-contention)"),
    GangHostState("g", 2, 3, "leaving", "its owner is finishing"),
]


def through_the_wire(message: object) -> object:
    header, data = gang_to_wire(message, SPEC)
    assert has_bulk(header) == (data is not None)
    decoded = decode_message(header.CODE, encode_message(header))
    return gang_from_wire(decoded, data)


@pytest.mark.parametrize("message", EVERY_KIND, ids=lambda m: type(m).__name__)
def test_every_gang_message_round_trips(message: object) -> None:
    assert through_the_wire(message) == message


def test_mail_for_the_coordinator_says_so() -> None:
    header, _ = gang_to_wire(MAIL, home=True)
    assert isinstance(header, GangMail) and header.home
    assert not gang_to_wire(MAIL)[0].home


def test_a_start_carries_its_gangs_spec() -> None:
    header, _ = gang_to_wire(EVERY_KIND[0], SPEC)
    assert isinstance(header, GangStart) and header.spec == SPEC
    with pytest.raises(ValueError):
        gang_to_wire(EVERY_KIND[0])


@pytest.mark.parametrize(("header", "data", "reason"), [
    (GangReport("g", 1, 0, 3, (1, 1), None, False), None, "name a member twice"),
    (GangReport("g", 1, 0, 3, (-1,), None, False), None, "negative"),
    (GangReport("g", 1, 0, 3, (), None, True), None, "without bulk"),
    (GangReport("g", 1, 0, 3, (), None, False), b"\x00", "with bulk"),
    (GangReport("g", 1, 0, 3, (), None, True), b"\xff\xff", "result"),
    (GangMail("g", 1, 3, 0, 1, "h"), encode({"not": "a list"}), "not a list"),
    (GangStart(SPEC, "g", 3, 3, 1, 0), None, "not a member"),
    (GangHostState("g", 1, 3, "asleep", ""), None, "not 'asleep'"),
    (GangRelease("g", 0, 1, 3, (), WireCheck(("h1", "h2"), 2.0)), None, "between 0 and 1, not 2.0"),
    (GangRelease("g", 0, 1, 3, (), WireCheck(("h1", "h2"), float("nan"))), None, "between 0 and 1, not nan"),
    (GangRelease("g", 0, 1, 3, (), WireCheck(("h1", "h2"), 0.5, -0.1)), None, "at least 0, not -0.1"),
])
def test_malformed_gang_messages_are_refused(header, data, reason: str) -> None:
    with pytest.raises(ProtocolError, match=reason):
        gang_from_wire(header, data)


PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64 - 1) | st.text(max_size=8) | st.binary(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=12,
)
FIELDS = st.sampled_from(["spec", "gang_id", "rank", "size", "epoch", "superstep", "with_checkpoint", "expect",
                          "check", "forward_to", "sent_to", "move", "done", "sender", "dest", "reply_to", "routed",
                          "key", "at", "mail", "state", "reason"])


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(GANG_MESSAGES), st.dictionaries(FIELDS, PLAIN, max_size=12),
       st.none() | st.binary(max_size=40) | PLAIN.map(encode))
def test_fuzz_gang_headers_and_bulk(cls, fields: dict, data: bytes | None) -> None:
    """Whatever arrives is either refused with a ProtocolError or is a gang message that goes back out the same."""
    try:
        message = gang_from_wire(decode_message(cls.CODE, encode(fields)), data)
    except ProtocolError:
        return
    assert through_the_wire(message) == message
