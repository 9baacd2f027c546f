"""A move's source killed (-9) mid-send, its capture still being synced: the unit stays runnable from its checkpoint.

The source is a real supervisor in a process of its own with a real guest: it captures the unit
for a move (the capture leaves before its fsync, which runs behind), starts sending it to a
socket nobody reads (so the send is under way) and is killed there. A fresh supervisor on the
same disk then resumes the unit from the newest checkpoint it finds and gives the identical result.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import textwrap

import trio

from frost_core.guest.supervisor import GuestSupervisor
from frost_core.guest.views import Completed
from tests.guest_kit import HEADER, MIB, Recorder, counter_result, fast_settings, make_task, write_plugin

# A counter whose state carries 2 MiB of ballast: the capture's write, fsync and rename are what
# runs behind the send.
BALLAST = HEADER + textwrap.dedent(
    """
    class Ballast(Plugin):
        name = "ballast"
        version = "1"

        def start(self, unit):
            return {"i": 0, "n": unit.data["n"], "total": 0, "ballast": bytes(range(256)) * 8192}

        def step(self, state):
            i = state["i"]
            if i >= state["n"]:
                return Done({"total": state["total"], "n": i, "ballast": sum(state["ballast"][::4096])})
            extra = 0
            for k in range(3000):
                extra = (extra + k * i) % 1000003
            return {**state, "i": i + 1, "total": (state["total"] * 31 + i * i + extra) % (1 << 61)}

        def progress(self, state):
            return state["i"] / state["n"]

        def split(self, params):
            return []

        def combine(self, params, results):
            return results
    """
) + "\nplugin = Ballast()\n"
UNIT = {"n": 400}

SOURCE = """
import socket, sys, trio
from pathlib import Path
from frost_core.guest.supervisor import GuestSupervisor
from tests.guest_kit import fast_settings, make_task

async def main(data_dir, plugin, port):
    # No spare process: nothing of the killed source may outlive it. Checkpoints every 0.2 s.
    settings = fast_settings(warm_spare=False, min_checkpoint_interval=0.2, max_checkpoint_interval=0.2)
    guests = GuestSupervisor(data_dir=Path(data_dir), settings=settings, on_event=lambda event: None)
    task = make_task(Path(plugin), {"n": 400})
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
