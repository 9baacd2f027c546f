"""A move that sends the capture while it comes up the guest's pipe, to a destination over real links.

The source is a real supervisor with a real guest whose state is 24 MiB; the destination a
`Links` on a real authenticated loopback channel that writes what arrives to its store. The
destination's first bytes come while the guest is still writing its state (stopped there, its
capture does not end); the hash follows the state, and one that does not match is refused, the
destination keeping nothing, and the unit goes on from the source's own durable capture.
"""

from __future__ import annotations

import os
import signal

import pytest
import trio

from frost_core.cluster.links import Links
from frost_core.cluster.messages import UnitSpec, Verdict
from frost_core.guest.capture_feed import CaptureFeed
from frost_core.guest.supervisor import GuestSupervisor
from frost_core.guest.views import Completed
from frost_core.plugin.plain import encode_plain
from frost_core.storage.checkpoints import CheckpointStore
from frost_core.wire.security import ClusterKey
from tests.guest_kit import BALLAST, MIB, Recorder, counter_result, fast_settings, make_task, write_plugin
from tests.unit.test_links import serve_transports
from tests.waiting import wait_until

UNIT = {"n": 1500, "mib": 24}


class KeepingHost:
    """The destination's host side: makes the arrived checkpoint durable (checking its hash), then answers."""

    def __init__(self, store: CheckpointStore) -> None:
        self.store = store

    async def start(self, source, spec, record, *, moved=False):
        await trio.to_thread.run_sync(self.store.write, record)
        return Verdict(ok=True)


class WatchedStore(CheckpointStore):
    """A store that calls `on_first_piece` when the first bytes of an arriving checkpoint land."""

    def __init__(self, root, on_first_piece) -> None:
        super().__init__(root)
        self.on_first_piece = on_first_piece

    def incoming(self, record, size):
        incoming = super().incoming(record, size)
        filled = incoming.filled

        def first(piece):
            incoming.filled = filled
            self.on_first_piece()
            filled(piece)

        incoming.filled = first
        return incoming


class MisSealedFeed(CaptureFeed):
    """A feed whose trailer carries a hash that is not the state's (a damaged trailer)."""

    async def sealed(self) -> str:
        digest = await super().sealed()
        return ("0" if digest[0] != "0" else "1") + digest[1:]


def spec_of(task) -> UnitSpec:
    return UnitSpec(task_id=task.task_id, assignment_id=task.assignment_id, master="m", plugin_name=task.plugin_name,
                    plugin_version=task.plugin_version, plugin_hash=task.plugin_hash,
                    unit=encode_plain(task.unit.to_plain()), memory_bytes=task.unit.memory_bytes, epoch=task.epoch + 1)


async def linked(nursery, store: CheckpointStore) -> Links:
    """Links of a source node "a" to a destination "b" that keeps what arrives in `store`."""
    key = ClusterKey.generate()
    transports = await serve_transports(nursery, {"a": key, "b": key})
    addresses = {name: t.local_address for name, t in transports.items()}
    source = Links(node_id="a", address_of=addresses.get)
    source.install(transports["a"])
    destination = Links(node_id="b", address_of=addresses.get, checkpoints=store)
    destination.bind(master=object(), host=KeepingHost(store), keeper=object())  # type: ignore[arg-type]
    destination.install(transports["b"])
    return source


@pytest.mark.parametrize("trailer", ["sound", "damaged"])
async def test_a_capture_reaches_the_destination_while_the_guest_still_writes_it_and_its_hash_follows(tmp_path,
                                                                                                     trailer):
    path = write_plugin(tmp_path, "ballast", BALLAST)
    task = make_task(path, UNIT, memory=256 * MIB)
    # No periodic checkpoints and no spare: the capture is the unit's only checkpoint.
    settings = fast_settings(warm_spare=False, min_checkpoint_interval=3600, max_checkpoint_interval=3600)
    source = GuestSupervisor(data_dir=tmp_path / "source", settings=settings, on_event=Recorder())
    first_piece = trio.Event()
    stopped: list[int] = []

    def on_first_piece() -> None:  # (on the trio thread, as the destination's channel receives)
        if trailer == "sound":
            stopped.extend(source.guest_pids())
            for pid in stopped:
                os.kill(pid, signal.SIGSTOP)  # the guest stops mid-write: its capture cannot end now
        first_piece.set()

    kept = WatchedStore(tmp_path / "destination", on_first_piece)
    verdicts: list[Verdict] = []
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            links = await linked(nursery, kept)
            nursery.start_soon(source.keep_warm)   # where the capture's durable write runs behind the move
            nursery.start_soon(source.run, task)
            await wait_until(lambda: any(f.progress > 0.01 for f in source.figures()))
            feed = CaptureFeed() if trailer == "sound" else MisSealedFeed()
            assert source.feed_capture(task.task_id, feed)

            async def send() -> None:
                verdicts.append(await links.start_fed("b", spec_of(task), feed))

            nursery.start_soon(send)
            captured: list = []
            captured_done = trio.Event()

            async def capture() -> None:
                captured.append(await source.capture(task.task_id, 60.0))
                captured_done.set()

            nursery.start_soon(capture)
            await first_piece.wait()
            if trailer == "sound":
                with trio.move_on_after(1.0):
                    await captured_done.wait()
                assert not captured_done.is_set(), "the destination had bytes only once the whole state was in"
                for pid in stopped:
                    os.kill(pid, signal.SIGCONT)
            await captured_done.wait()
            await wait_until(lambda: verdicts, what="the destination's answer")
            await source.settled(task.task_id)
            nursery.cancel_scope.cancel()

    record = captured[0]
    assert record is not None and record.size > 20 * MIB
    assert source.store.latest(task.task_id) == record, "the source's capture is durable there"
    if trailer == "sound":
        assert verdicts[0].ok
        assert kept.latest(task.task_id) == record and kept.latest(task.task_id).state == record.state
    else:
        assert not verdicts[0].ok and "SHA-256" in verdicts[0].reason
        assert not kept.files(task.task_id) and not any((kept.root / task.task_id).glob("*")), "nothing kept"
        # The unit goes on from the source's own capture, bit-identical: same result as a run with no move.
        again = GuestSupervisor(data_dir=tmp_path / "source", settings=settings, on_event=(recorder := Recorder()))
        outcome = await again.run(task)
        assert isinstance(outcome, Completed) and outcome.value() == counter_result(path, UNIT)
        assert any(f"from checkpoint {record.seq}" in m for m in recorder.messages("start"))
