"""Everything that is hashed is encoded in one canonical CBOR order, whatever the dicts' insertion order."""

from __future__ import annotations

import dataclasses

import pytest

from frost_core.cluster.messages import CheckpointMeta
from frost_core.guest import envelope
from frost_core.api.errors import PluginError
from frost_core.guest.state_codec import encode_state, encode_state_pieces
from frost_core.plugin.plain import decode_plain, encode_plain
from frost_core.storage.checkpoints import IDENTITY, CheckpointRecord, encode_header
from frost_core.wire.codec import encode

# Keys of both kinds and of several encoded lengths: the orders that differ (length first, or
# bytewise) disagree exactly on maps that mix them.
PAIRS = [(1000, "big int"), ("", "empty"), (-3, "negative"), ("a" * 30, "long"), (7, "small"), ("k", b"x" * 5000),
         ("nested", {"z": 1, 10_000: [1.5, None, True], "y": {"b": 2, "a": 1}})]


def in_order(pairs):
    return {key: value for key, value in pairs}


ORDERS = [PAIRS, list(reversed(PAIRS)), PAIRS[3:] + PAIRS[:3]]


@pytest.mark.parametrize("pairs", ORDERS)
def test_every_encoder_of_plain_data_gives_the_wire_codecs_bytes(pairs):
    value = in_order(pairs)
    expected = encode(in_order(PAIRS))
    assert encode(value) == expected
    assert encode_plain(value) == expected       # units, results
    assert encode_state(value) == expected       # checkpoint states (bulk bytes by reference)


def test_envelopes_do_not_depend_on_the_order_of_their_files():
    files = [("b.png", b"\x89PNG" * 2000), ("a.txt", b"hello"), ("c", b"")]
    packed = [envelope.pack(envelope.RESULT, b"\xa0", dict(order), 1 << 30) for order in (files, files[::-1])]
    assert packed[0] == packed[1]
    assert envelope.pack(envelope.RESULT, b"\xa0", dict(files), 1 << 30) == encode(
        {"result": b"\xa0", "files": dict(files)})


@pytest.mark.parametrize("kind", [envelope.STATE, envelope.RESULT])
@pytest.mark.parametrize("files", [{}, {"a.txt": b"hello", "b.png": b"\x89PNG" * 2000}])
def test_an_envelope_of_state_pieces_is_the_wire_codecs_encoding_and_opens_in_place(kind, files):
    state = in_order(PAIRS) | {"pixels": bytes(range(256)) * 100}
    pieces = envelope.pack_pieces(kind, encode_state_pieces(state), files, 1 << 30)
    assert any(piece is state["pixels"] for piece in pieces), "the bulk bytes are placed, not copied"
    packed = b"".join(pieces)
    assert packed == encode({kind: encode(state), "files": files})
    payload, opened = envelope.open_envelope(kind, packed)
    assert isinstance(payload, memoryview) and payload.obj is packed and payload == encode(state)
    assert opened == files
    assert decode_plain(packed, start=len(packed) - len(payload)) == state  # where a resumed guest decodes it
    assert envelope.unpack(kind, packed) == (encode(state), files)
    for cut in (1, 7, len(packed) - 1):  # truncated anywhere: refused, never a short state
        with pytest.raises(PluginError):
            envelope.open_envelope(kind, packed[:cut])
    with pytest.raises(PluginError, match="after its end"):
        envelope.open_envelope(kind, packed + b"\0")


def test_a_checkpoint_header_is_the_wire_codecs_encoding_of_its_fields():
    record = CheckpointRecord.seal(task_id="n0de0001-1.0", plugin_name="p", plugin_version="1",
                                   plugin_hash="ab" * 32, unit_index=0, epoch=1, seq=2, taken_at=1.5e9,
                                   state=b"state")
    header = encode_header(record)
    fields = {"task_id": record.task_id, "plugin_name": "p", "plugin_version": "1", "plugin_hash": "ab" * 32,
              "unit_index": 0, "epoch": 1, "seq": 2, "taken_at": 1.5e9, "state_size": 5, "sha256": record.sha256}
    assert header.endswith(encode(fields))


def test_the_checkpoint_identity_is_declared_once_and_the_wire_mirrors_it():
    assert [f.name for f in dataclasses.fields(CheckpointMeta)] == [*IDENTITY, "sha256"]
    assert [f.name for f in dataclasses.fields(CheckpointRecord)][: len(IDENTITY)] == list(IDENTITY)
