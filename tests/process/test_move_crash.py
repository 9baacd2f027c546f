"""A move's two ends with real guests: each writes the checkpoint durably beside its part of the move.

The source captures the unit and sends it while its own fsync runs behind: killed (-9) mid-send,
it leaves the unit runnable from its checkpoint. The destination starts the guest while it syncs
the arrived checkpoint and hands the guest its state only once it is durable: the result is the
same, and a checkpoint it cannot keep ends the guest without its state.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys

import pytest
import trio

from frost_core.api.errors import CheckpointError
from frost_core.guest.supervisor import GuestSupervisor
from frost_core.guest.views import Completed, Failed
from tests.guest_kit import (
    BALLAST, COUNTER, LONG, MIB, Recorder, counter_result, fast_settings, guest_processes, make_task, write_plugin,
)
from tests.waiting import wait_until

UNIT = {"n": 4000}   # about a second of steps: a capture at 10 % comes well before the end, however idle the machine

SOURCE = """
import socket, sys, trio
from pathlib import Path
from frost_core.guest.supervisor import GuestSupervisor
from tests.guest_kit import fast_settings, make_task

async def main(data_dir, plugin, port):
    # No spare process: nothing of the killed source may outlive it. Checkpoints every 0.2 s.
    settings = fast_settings(warm_spare=False, min_checkpoint_interval=0.2, max_checkpoint_interval=0.2)
    guests = GuestSupervisor(data_dir=Path(data_dir), settings=settings, on_event=lambda event: None)
    task = make_task(Path(plugin), {"n": 4000})
    async with trio.open_nursery() as nursery:
        nursery.start_soon(guests.keep_warm)   # where a capture's durable write runs behind its move
        nursery.start_soon(guests.run, task)
        while not any(f.last_checkpoint_seq and f.progress > 0.1 for f in guests.figures()):
            await trio.sleep(0.01)
        record = await guests.capture(task.task_id, 10.0)
        peer = socket.create_connection(("127.0.0.1", port))
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        print("sending", record.seq, flush=True)
        peer.sendall(record.state)   # nobody reads: blocks here, mid-send, until killed

trio.run(main, *sys.argv[1:3], int(sys.argv[3]))
"""


async def test_a_source_killed_mid_send_leaves_the_unit_runnable_from_its_checkpoint(tmp_path):
    path = write_plugin(tmp_path, "ballast", BALLAST)
    data_dir = tmp_path / "source"
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        source = subprocess.Popen([sys.executable, "-c", SOURCE, str(data_dir), str(path),
                                   str(listener.getsockname()[1])], stdout=subprocess.PIPE, text=True)
        try:
            assert source.stdout is not None
            line = await trio.to_thread.run_sync(source.stdout.readline)
            assert line.startswith("sending"), line
            source.send_signal(signal.SIGKILL)  # the capture's fsync may still be running behind the send
        finally:
            source.kill()
            source.wait()
            source.stdout.close()  # type: ignore[union-attr]
    captured = int(line.split()[1])

    recorder = Recorder()
    guests = GuestSupervisor(data_dir=data_dir, settings=fast_settings(), on_event=recorder)
    task = make_task(path, UNIT)
    newest = guests.store.latest(task.task_id)
    assert newest is not None and newest.seq in (captured - 1, captured)  # the capture, or the one before it
    outcome = await guests.run(task)
    assert isinstance(outcome, Completed) and outcome.value() == counter_result(path, UNIT)
    assert any(f"from checkpoint {newest.seq}" in m for m in recorder.messages("start"))
    assert newest.size > MIB


@pytest.mark.parametrize("kept", [True, False], ids=["durable", "not-kept"])
async def test_a_moved_in_guest_gets_its_state_only_once_its_checkpoint_is_durable_here(tmp_path, kept):
    path = write_plugin(tmp_path, "counter", COUNTER)
    task = make_task(path, LONG)
    source = GuestSupervisor(data_dir=tmp_path / "source", settings=fast_settings(), on_event=Recorder())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(source.run, task)
        await wait_until(lambda: any(f.last_checkpoint_seq for f in source.figures()))
        record = await source.capture(task.task_id, 10.0)
    assert record is not None

    recorder = Recorder()
    destination = GuestSupervisor(data_dir=tmp_path / "destination", settings=fast_settings(), on_event=recorder)
    started_first = []

    async def durable() -> None:
        # The guest process runs (and settles in) while the checkpoint is being made durable.
        started_first.append(bool(recorder.messages("start")) and bool(guest_processes()))
        if not kept:
            raise CheckpointError("checkpoint was not written (disk full)")
        await trio.to_thread.run_sync(destination.store.write, record)

    outcome = await destination.run(task, checkpoint=record, durable=durable)
    assert started_first == [True]
    if kept:
        assert isinstance(outcome, Completed) and outcome.value() == counter_result(path, LONG)
        assert any(f"from checkpoint {record.seq}" in m for m in recorder.messages("start"))
    else:
        assert isinstance(outcome, Failed) and outcome.retryable and "disk full" in outcome.reason
        assert not guest_processes()
