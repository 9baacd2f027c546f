"""A gang member's inbox on the guest pipe: what the node encodes the member decodes; anything else is refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.api.errors import ProtocolError
from frost_core.guest.inbox import decode_inbox, encode_inbox
from frost_core.plugin.plain import encode_plain

SIZE = 4
MESSAGE = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.text(max_size=8) | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
INBOX = st.dictionaries(st.integers(0, SIZE - 1), st.lists(MESSAGE, max_size=3), max_size=SIZE)


@settings(deadline=None)
@given(INBOX)
def test_an_inbox_round_trips_with_its_senders_in_ascending_order(inbox):
    decoded = decode_inbox(encode_inbox(inbox, SIZE), SIZE)
    assert decoded == inbox
    assert list(decoded) == sorted(inbox)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120))
def test_any_bytes_decode_to_an_inbox_of_the_gang_or_a_protocol_error(data):
    try:
        inbox = decode_inbox(data, SIZE)
    except ProtocolError:
        return
    assert all(isinstance(k, int) and 0 <= k < SIZE and isinstance(v, list) for k, v in inbox.items())


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.integers(-3, 2 * SIZE) | st.text(max_size=3), MESSAGE, max_size=4))
def test_plain_maps_that_are_not_inboxes_of_the_gang_are_refused_both_ways(plain):
    is_inbox = all(isinstance(k, int) and 0 <= k < SIZE and isinstance(v, list) for k, v in plain.items())
    if is_inbox:
        assert decode_inbox(encode_plain(plain), SIZE) == dict(sorted(plain.items()))
        return
    with pytest.raises(ProtocolError, match="sender ranks below 4"):
        decode_inbox(encode_plain(plain), SIZE)
    with pytest.raises(ProtocolError, match="sender ranks below 4"):
        encode_inbox(plain, SIZE)
