"""The fast state encoder gives byte-for-byte the canonical encoding plugins already use."""

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.api.errors import PluginError
from frost_core.guest.state_codec import BY_REFERENCE_FROM, encode_state
from frost_core.plugin.api import decode_plain, encode_plain

leaves = (
    st.none() | st.booleans() | st.integers(min_value=-(2**64), max_value=2**64 - 1)
    | st.floats(allow_nan=False) | st.text(max_size=20) | st.binary(max_size=40)
    | st.integers(min_value=BY_REFERENCE_FROM, max_value=3 * BY_REFERENCE_FROM).map(lambda n: bytes([n % 256]) * n)
)
plain = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=5)
    | st.dictionaries(st.text(max_size=8) | st.integers(min_value=-1000, max_value=1000), inner, max_size=5),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(plain)
def test_same_bytes_as_canonical_cbor(value):
    encoded = encode_state(value)
    assert encoded == cbor2.dumps(value, canonical=True) == encode_plain(value, limit=1 << 30)
    assert decode_plain(encoded) == value


@pytest.mark.parametrize(
    ("value", "problem"),
    [({"seen": {1, 2}}, "holds a set"), ({"blob": b"x" * 10_000}, "over the limit of 5000 bytes")],
)
def test_bad_or_oversized_state_is_refused_clearly(value, problem):
    with pytest.raises(PluginError, match=problem):
        encode_state(value, limit=5000)
