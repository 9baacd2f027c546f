"""The guest child's side of a gang member, over in-memory pipes: answers as the plugin gives them, strict order."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from frost_core.api.errors import ProtocolError
from frost_core.guest.inbox import encode_inbox
from frost_core.guest.member import run_member
from frost_core.guest.protocol import (
    GuestMemberCheckpoint,
    GuestMemberCheckpointRequest,
    GuestMemberFinish,
    GuestMemberReady,
    GuestMemberResult,
    GuestMemberStart,
    GuestSuperstep,
    GuestSuperstepAnswer,
)
from frost_core.plugin.api import parse_params
from frost_core.plugin.gang import MemberCheckpoint, Superstep
from frost_core.plugin.limits import MAX_STATE_BYTES
from frost_core.plugin.loader import load_plugin_file
from frost_core.plugin.plain import decode_plain, encode_plain
from frost_core.wire.pipe import read_bulk_data, read_frame, write_bulk, write_frame

HEAT = Path(__file__).resolve().parents[2] / "plugins" / "heat_diffusion.py"
PARAMS = {"height": 6, "width": 5, "members": 1, "iterations": 2}


START = GuestMemberStart(task_id="g-1.0", plugin_path=str(HEAT), params=encode_plain(PARAMS), rank=0, size=1,
                         max_state_bytes=MAX_STATE_BYTES, scratch=".", address_space=0)


def drive(requests: list[tuple[object, bytes | None]], checkpoint: bytes = b"") -> list[tuple[object, bytes]]:
    """Run the member on these requests (a bulk request with its data); its answers, each with its bulk data."""
    into = io.BytesIO()
    write_bulk(into, START, checkpoint)
    for message, bulk in requests:
        write_bulk(into, message, bulk) if bulk is not None else write_frame(into, message)
    into.seek(0)
    assert read_frame(into) == START  # the child reads it before it settles in and loads the plugin
    out = io.BytesIO()
    assert run_member(into, out, START, load_plugin_file(HEAT), lambda: None) == 0
    out.seek(0)
    assert read_frame(out) == GuestMemberReady(rank=0)  # before any plugin code runs
    answers = []
    while out.tell() < len(out.getvalue()):
        answer = read_frame(out)
        answers.append((answer, read_bulk_data(out, max_size=MAX_STATE_BYTES)))
    return answers


def test_each_answer_is_the_plugins_own_superstep_and_the_result_is_its_finish():
    plugin = load_plugin_file(HEAT)
    state = plugin.start(parse_params(plugin, PARAMS), 0, 1)
    answers = drive([(GuestSuperstep(superstep=s), encode_inbox({}, 1)) for s in range(3)]
                    + [(GuestMemberFinish(superstep=2), None)])
    for superstep, (header, data) in enumerate(answers[:3]):
        expected = plugin.step(state, 0, 1, {})
        state = expected.state
        assert header == GuestSuperstepAnswer(superstep=superstep)
        assert Superstep.from_plain(decode_plain(data), 0, 1, superstep) == Superstep(None, {}, expected.done)
    header, data = answers[3]
    assert header == GuestMemberResult(superstep=2)
    assert decode_plain(data) == plugin.finish(state, 0, 1)


def test_a_checkpoint_at_a_barrier_holds_the_state_before_the_next_superstep_and_resumes_there():
    answers = drive([(GuestSuperstep(superstep=0), encode_inbox({}, 1)),
                     (GuestMemberCheckpointRequest(superstep=1), encode_inbox({0: ["to self"]}, 1))])
    header, data = answers[1]
    assert isinstance(header, GuestMemberCheckpoint) and header.superstep == 1
    checkpoint = MemberCheckpoint.from_bytes(data, 1)
    assert (checkpoint.rank, checkpoint.superstep, checkpoint.inbox) == (0, 1, {0: ["to self"]})
    assert checkpoint.state["iteration"] == 1
    resumed = drive([(GuestSuperstep(superstep=1), encode_inbox({}, 1))], checkpoint=data)
    assert resumed[0][0] == GuestSuperstepAnswer(superstep=1)


@pytest.mark.parametrize("requests, reason", [
    ([(GuestSuperstep(superstep=1), b"")], "asked about superstep 1; it is at superstep 0"),
    ([(GuestMemberFinish(superstep=0), None)], "unexpected GuestMemberFinish for gang member 0 before superstep 0"),
    ([(GuestMemberCheckpointRequest(superstep=0), encode_plain({1: []}))], "sender ranks below 1"),
    ([(GuestSuperstep(superstep=s), encode_inbox({}, 1)) for s in range(3)] + [(GuestSuperstep(superstep=3), b"")],
     "unexpected GuestSuperstep for gang member 0 after it said done"),
])
def test_a_request_out_of_order_is_a_protocol_error(requests, reason):
    with pytest.raises(ProtocolError, match=reason):
        drive(requests)
