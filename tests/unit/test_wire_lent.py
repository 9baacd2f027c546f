"""A channel's pipe lent to a thread: it reads on where the loop stopped, and the loop reads on where it stopped."""

from __future__ import annotations

import os
import time

import pytest
import trio

from frost_core.api.errors import ProtocolError
from frost_core.guest.protocol import GuestLog, GuestProgress
from frost_core.wire.channel import Channel
from frost_core.wire.framing import encode_frame
from frost_core.wire.messages import encode_message
from frost_core.wire.pipe import read_bulk_data, read_frame, write_bulk


def frame(text: str) -> bytes:
    message = GuestLog(level="info", text=text)
    return encode_frame(message.CODE, encode_message(message))


async def test_a_thread_reads_on_from_what_the_loop_buffered_and_the_loop_from_what_it_left():
    read_end, write_end = os.pipe()
    channel = Channel(trio.testing.MemorySendStream(), trio.lowlevel.FdStream(read_end))
    with os.fdopen(write_end, "wb") as pipe:
        pipe.write(frame("one") + frame("two"))  # one read of the loop's takes both
        write_bulk(pipe, GuestProgress(progress=0.5, steps=1), b"state" * 1000)
        pipe.write(frame("three"))
    assert await channel.receive() == GuestLog(level="info", text="one")
    assert channel.lendable

    def work(lent):
        first = read_frame(lent)
        return first, read_frame(lent), read_bulk_data(lent, max_size=1 << 20)

    assert await channel.lend_pipe(work) == (
        GuestLog(level="info", text="two"), GuestProgress(progress=0.5, steps=1), b"state" * 1000)
    assert await channel.receive() == GuestLog(level="info", text="three")
    await channel.aclose()


async def test_a_cancel_takes_the_pipe_back_between_frames_and_waits_for_a_frame_begun():
    read_end, write_end = os.pipe()
    channel = Channel(trio.testing.MemorySendStream(), trio.lowlevel.FdStream(read_end))
    with trio.move_on_after(0.2) as waited:  # nothing comes: the thread gives the pipe back
        await channel.lend_pipe(lambda lent: (lent.between_frames(), read_frame(lent)))
    assert waited.cancelled_caught
    whole = frame("half and half")
    os.write(write_end, whole[:5])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.to_thread.run_sync, lambda: (time.sleep(0.3), os.write(write_end, whole[5:] + frame("next"))))
        with trio.move_on_after(0.1) as waited:  # a frame begun is read whole before the pipe goes back
            assert await channel.lend_pipe(lambda lent: (lent.between_frames(), read_frame(lent))[1]) == (
                GuestLog(level="info", text="half and half"))
    assert await channel.receive() == GuestLog(level="info", text="next")
    os.close(write_end)
    await channel.aclose()


async def test_a_frame_left_half_written_holds_a_cancel_only_for_the_grace_then_the_channel_is_torn(monkeypatch):
    monkeypatch.setattr("frost_core.wire.lent.MID_FRAME_GRACE", 0.2)
    read_end, write_end = os.pipe()
    channel = Channel(trio.testing.MemorySendStream(), trio.lowlevel.FdStream(read_end))
    os.write(write_end, frame("never finished")[:5])
    with trio.move_on_after(0.1) as waited:
        await channel.lend_pipe(lambda lent: (lent.between_frames(), read_frame(lent)))
    assert waited.cancelled_caught and channel.torn and not channel.lendable
    with pytest.raises(ProtocolError, match="middle of a frame"):
        await channel.receive()
    os.close(write_end)
    await channel.aclose()
