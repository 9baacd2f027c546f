"""The plugin API: parameter parsing and declarations, plain-data checks, PNG encoding."""

import math
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.api.errors import PluginError
from frost_core.plugin.api import (
    MAX_STATE_BYTES,
    Done,
    Output,
    Param,
    Plugin,
    WorkUnit,
    decode_plain,
    encode_plain,
    encode_png,
    parse_params,
    run_locally,
)
from frost_core.plugin.plain import LIST_CHUNK, decode_pieces, encode_pieces


class Squares(Plugin):
    name = "squares"
    version = "1"
    params = (
        Param("count", int, 3, "how many", minimum=1, maximum=100),
        Param("scale", float, 1, minimum=0.0),
        Param("label", str, "sq", choices=("sq", "cube")),
        Param("verbose", bool, False),
    )

    def split(self, params):
        return [WorkUnit(i, {"x": i}, 1024, 1.0) for i in range(params["count"])]

    def start(self, unit):
        return {"x": unit.data["x"], "done": False}

    def step(self, state):
        return Done(state["x"] * state["x"])

    def progress(self, state):
        return 0.0

    def combine(self, params, results):
        return Output(",".join(map(str, results)).encode(), "text/plain", "squares.txt")


PLUGIN = Squares()


def test_defaults_fill_every_parameter_in_declaration_order():
    assert parse_params(PLUGIN, {}) == {"count": 3, "scale": 1.0, "label": "sq", "verbose": False}
    assert isinstance(parse_params(PLUGIN, {})["scale"], float)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"count": "7"}, {"count": 7}),  # CLI strings are converted
        ({"count": 7}, {"count": 7}),  # typed values from the UI pass
        ({"scale": "2.5"}, {"scale": 2.5}),
        ({"scale": 2}, {"scale": 2.0}),  # an int widens to float
        ({"verbose": "yes"}, {"verbose": True}),
        ({"verbose": "False"}, {"verbose": False}),
        ({"verbose": True}, {"verbose": True}),
        ({"label": "cube"}, {"label": "cube"}),
    ],
)
def test_values_are_converted_to_their_kind(raw, expected):
    parsed = parse_params(PLUGIN, raw)
    for key, value in expected.items():
        assert parsed[key] == value and type(parsed[key]) is type(value)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"colour": "red"}, ["unknown parameter 'colour'", "squares", "count"]),
        ({"count": "seven"}, ["'count' must be a whole number, not 'seven'"]),
        ({"count": "0"}, ["'count'", "below the minimum 1"]),
        ({"count": 101}, ["'count'", "above the maximum 100"]),
        ({"count": True}, ["'count'", "is not a whole number"]),  # a bool is not an int here
        ({"count": 2.5}, ["'count'", "is not a whole number"]),
        ({"scale": "nan"}, ["'scale'", "not a finite number"]),
        ({"scale": "-1"}, ["'scale'", "below the minimum"]),
        ({"label": "square"}, ["'label'", "not one of sq, cube"]),
        ({"verbose": "maybe"}, ["'verbose' must be true or false, not 'maybe'"]),
        ({"label": 3}, ["'label'", "is not text"]),
    ],
)
def test_bad_values_name_the_parameter_and_the_problem(raw, words):
    with pytest.raises(PluginError) as caught:
        parse_params(PLUGIN, raw)
    for word in words:
        assert word in caught.value.message


@pytest.mark.parametrize(
    ("declare", "words"),
    [
        (lambda: Param("bad name", int, 1), ["'bad name'", "identifier"]),
        (lambda: Param("n", "complex", 1), ["'n'", "kind 'complex'"]),
        (lambda: Param("n", int, "one"), ["'n'", "default 'one' is not a whole number"]),
        (lambda: Param("n", int, 0, minimum=1), ["'n'", "below the minimum 1"]),
        (lambda: Param("n", int, 5, minimum=9, maximum=1), ["'n'", "above maximum"]),
        (lambda: Param("s", str, "a", minimum=1), ["'s'", "only apply to int and float"]),
        (lambda: Param("s", str, "a", choices=()), ["'s'", "must not be empty"]),
        (lambda: Param("s", str, "c", choices=("a", "b")), ["'s'", "not one of a, b"]),
    ],
)
def test_contradictory_declarations_are_refused(declare, words):
    with pytest.raises(PluginError) as caught:
        declare()
    for word in words:
        assert word in caught.value.message


def test_param_survives_its_plain_form():
    param = Param("label", str, "sq", "help text", choices=("sq", "cube"))
    assert Param.from_plain(decode_plain(encode_plain(param.to_plain()))) == param


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: WorkUnit(-1, {}, 0, 0.0), "index"),
        (lambda: WorkUnit(0, [], 0, 0.0), "data must be a dict"),
        (lambda: WorkUnit(0, {"s": {1, 2}}, 0, 0.0), "set"),
        (lambda: WorkUnit(0, {}, -5, 0.0), "memory_bytes"),
        (lambda: WorkUnit(0, {}, 0, math.inf), "cost"),
        (lambda: Output("text", "text/plain", "a.txt"), "must be bytes"),
        (lambda: Output(b"", "text/plain", "../etc/passwd"), "plain file name"),
        (lambda: Output(b"", "text/plain", "r" * 197 + ".txt"), "at most 200 bytes"),  # too long to export
        (lambda: Output(b"", "text/plain", "pi\x00.json"), "plain file name"),
    ],
)
def test_malformed_units_and_outputs_are_refused(make, words):
    with pytest.raises(PluginError, match=words):
        make()


def test_work_unit_round_trips_through_cbor():
    unit = WorkUnit(3, {"rows": [1, 2], "blob": b"\x00\x01"}, 4096, 2.5)
    assert WorkUnit.from_plain(decode_plain(encode_plain(unit.to_plain()))) == unit


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({1, 2}, "set"),
        ({"x": object()}, "object"),
        ({(1, 2): 3}, "map key of type tuple"),
        (2**70, "beyond 64 bits"),
        ({"rows": [[1, 2.5], {"k": b"\x00"}], 7: None}, None),
    ],
)
def test_only_plain_data_is_encoded(value, words):
    if words is None:
        assert decode_plain(encode_plain(value)) == value
        return
    with pytest.raises(PluginError, match=words):
        encode_plain(value)


def test_huge_state_is_refused_with_its_size():
    with pytest.raises(PluginError, match="state is 1033 bytes encoded, over the limit of 1000 bytes"):
        encode_plain({"blob": bytes(1024)}, limit=1000)
    assert encode_plain.__defaults__[-1] == MAX_STATE_BYTES


@pytest.mark.parametrize(
    "hex_bytes",
    [
        "d81c81d81d00",  # shared references: the exponential-expansion trap
        "c24101",  # bignum tag
        "9f00ff",  # indefinite length
        "a2616100616100",  # duplicate key
        "8181818181818181818181818181818181818181818181818181818181818181818181818181818181818181818181818181818181818181818181818181818181818100",
    ],
)
def test_decoder_refuses_what_plain_data_never_contains(hex_bytes):
    with pytest.raises(PluginError, match="not valid plain CBOR|nested deeper"):
        decode_plain(bytes.fromhex(hex_bytes))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_decoder_never_fails_otherwise(data):
    try:
        decode_plain(data)
    except PluginError:
        pass


plain_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64 - 1) | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5) | st.integers(0, 99), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(plain_values)
def test_plain_data_round_trips_exactly(value):
    assert decode_plain(encode_plain(value)) == value


@settings(max_examples=100, deadline=None)
@given(st.lists(plain_values, max_size=2_500))
def test_a_list_cut_into_pieces_comes_back_whole_and_in_order(items):
    """A split's units and a combine's results cross between the node and a plugin's worker in pieces (one
    decoding call each), so that a worker thread decoding 100,000 of them lets the node's event loop run."""
    pieces = encode_pieces(items, "units", 1 << 20)
    assert len(pieces) == -(-len(items) // LIST_CHUNK)
    assert decode_pieces(decode_plain(encode_plain(pieces)), "units") == items
    # Made into what the node keeps piece by piece (a split's WorkUnits), in order.
    assert decode_pieces(pieces, "units", lambda item: ("made", item)) == [("made", item) for item in items]


@settings(max_examples=200, deadline=None)
@given(plain_values)
def test_anything_but_pieces_of_a_list_is_refused_by_name(value):
    try:
        decode_pieces(value, "the split's units")
    except PluginError as error:
        assert "the split's units" in error.message
    else:
        assert isinstance(value, list) and all(isinstance(piece, bytes) for piece in value)


def test_png_holds_the_pixels_given():
    pixels = bytes(range(256)) * 3 + bytes(12)
    png = encode_png(20, 13, pixels)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png.endswith(b"IEND\xaeB`\x82")
    (length,) = struct.unpack(">I", png[33:37])
    assert png[37:41] == b"IDAT"
    raw = zlib.decompress(png[41 : 41 + length])
    assert b"".join(raw[y * 61 + 1 : (y + 1) * 61] for y in range(13)) == pixels


def test_png_refuses_pixels_of_the_wrong_size():
    with pytest.raises(PluginError, match="not 2x2 RGB"):
        encode_png(2, 2, b"\x00" * 11)


def test_run_locally_runs_a_whole_assignment():
    assert run_locally(PLUGIN, {"count": "4"}).data == b"0,1,4,9"
