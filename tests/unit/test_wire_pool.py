"""The channel pool's promises with stand-in channels: a request goes out at most once, answers never cross."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from frost_core.wire.pool import KEPT_PER_PEER, ChannelPool

PEER = ("127.0.0.1", 9)


class FakeChannel:
    """Answers each request with itself; `broken` fails the next send as a reset connection does."""

    def __init__(self, name: int) -> None:
        self.name, self.broken, self.closed, self.sent = name, False, False, []

    def quiet(self) -> bool:
        return True  # the peer's reset is not visible yet: only sending finds it

    async def send(self, request: str) -> None:
        if self.broken:
            raise trio.BrokenResourceError("connection reset by peer")
        self.sent.append(request)

    async def receive(self) -> str:
        await trio.sleep(0)
        return f"{self.sent[-1]} answered on {self.name}"

    async def aclose(self) -> None:
        self.closed = True


def fake_pool() -> tuple[ChannelPool, list[FakeChannel]]:
    opened: list[FakeChannel] = []

    async def connect(address):
        opened.append(FakeChannel(len(opened)))
        return opened[-1]

    return ChannelPool(connect, idle_timeout=30), opened


async def call(pool: ChannelPool, request: str) -> str:
    return await pool.call(PEER, lambda channel: channel.send(request), FakeChannel.receive)


async def test_a_request_that_could_not_leave_a_kept_channel_goes_once_more_on_a_fresh_one():
    pool, opened = fake_pool()
    assert await call(pool, "first") == "first answered on 0"
    opened[0].broken = True
    assert await call(pool, "second") == "second answered on 1"
    assert opened[0].closed and [c.sent for c in opened] == [["first"], ["second"]]


async def test_a_fresh_channel_that_breaks_or_an_answer_that_fails_is_not_retried():
    pool, opened = fake_pool()

    async def broken_answer(channel):
        raise trio.BrokenResourceError("reset after the request left")

    with pytest.raises(trio.BrokenResourceError):
        await pool.call(PEER, lambda channel: channel.send("once"), broken_answer)
    assert len(opened) == 1 and opened[0].closed, "the peer may have acted on it: never sent twice"
    assert pool.idle(PEER) == 0


async def test_calls_at_once_each_get_their_own_answer_and_few_channels_are_kept():
    pool, opened = fake_pool()
    answers: dict[int, str] = {}

    async def one(n: int) -> None:
        answers[n] = await call(pool, f"request {n}")

    async with trio.open_nursery() as nursery:
        for n in range(10):
            nursery.start_soon(one, n)
    await trio.testing.wait_all_tasks_blocked()  # the closes run as tasks of their own
    assert all(answers[n].startswith(f"request {n} answered") for n in range(10))
    assert pool.idle(PEER) == KEPT_PER_PEER and sum(c.closed for c in opened) == len(opened) - KEPT_PER_PEER
    pool.close()
    await trio.testing.wait_all_tasks_blocked()
    assert pool.idle(PEER) == 0 and all(c.closed for c in opened)


async def test_a_channel_lent_out_when_the_pool_is_renewed_is_closed_after_its_call_not_kept():
    pool, opened = fake_pool()
    assert await call(pool, "kept") == "kept answered on 0"
    lent = trio.Event()
    go_on = trio.Event()

    async def slow_answer(channel):
        lent.set()
        await go_on.wait()
        return await channel.receive()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: pool.call(PEER, lambda channel: channel.send("in flight"), slow_answer))
        await lent.wait()
        pool.renew()   # (the cluster key changed while the call was out)
        go_on.set()
    await trio.testing.wait_all_tasks_blocked()
    assert opened[0].closed and pool.idle(PEER) == 0
    assert await call(pool, "after") == "after answered on 1", "a fresh channel, under the new key"
