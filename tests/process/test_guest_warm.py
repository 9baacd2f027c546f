"""Warm guests: one process runs the units of an assignment in turn, each unit with its own result, CPU and folder."""

from __future__ import annotations

import re
import textwrap

import psutil
import trio

from frost_core.guest import Completed, Evicted, GuestSupervisor
from tests.guest_kit import (
    COMBINE, COUNTER, HEADER, LONG, Recorder, counter_result, fast_settings, guest_processes, make_task, write_plugin,
)
from tests.waiting import wait_until

PEEK = HEADER + textwrap.dedent(
    """
    import os
    import threading
    import time

    class Peek(Plugin):
        name = "peek"
        version = "1"

        def start(self, unit):
            if unit.data.get("linger"):
                threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
            seen = sorted(os.listdir("."))
            if unit.data.get("nest"):   # a folder with something in it: emptied off the node's loop
                os.makedirs("deep/er")
                open("deep/er/file.txt", "w").close()
            with open("left-behind.txt", "w") as scribble:
                scribble.write("unit %d was here" % unit.index)
            return {"seen": seen, "pid": os.getpid()}

        def step(self, state):
            return Done(state)

        def progress(self, state):
            return 0.0
    """
) + textwrap.indent(COMBINE, "    ") + "\nplugin = Peek()\n"


def started_pids(recorder: Recorder) -> list[int]:
    return [int(re.search(r"\(pid (\d+)", message).group(1)) for message in recorder.messages("start")]


async def test_one_process_runs_several_units_in_turn_each_with_its_own_result_and_cpu_time(tmp_path):
    recorder = Recorder()
    # Two units per process, so the third unit shows the process is renewed (the default is 1000).
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(units_per_process=2),
                             on_event=recorder)
    path = write_plugin(tmp_path, "counter", COUNTER)
    heavy, light = {"n": 300, "spin": 2000}, {"n": 7}
    tasks = [make_task(path, data, task_id=f"n0de0001-1.{i}") for i, data in enumerate((heavy, light, light))]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(guests.keep_warm)
        outcomes = [await guests.run(task) for task in tasks]
        assert len(guest_processes()) == 1  # the third unit's process waits for a fourth ...
        await guests.cancel_assignment("n0de0001-1")
        assert guest_processes() == []  # ... until its assignment is cancelled
        nursery.cancel_scope.cancel()
    assert all(isinstance(outcome, Completed) for outcome in outcomes)
    assert [o.value() for o in outcomes] == [counter_result(path, data) for data in (heavy, light, light)]
    first, second, third = started_pids(recorder)
    assert first == second != third
    # Each unit's CPU time is its own: the light unit does not inherit the heavy one's seconds.
    assert outcomes[1].cpu_seconds < outcomes[0].cpu_seconds / 2

    # Bit for bit what a fresh process per unit gives.
    fresh = GuestSupervisor(data_dir=tmp_path / "fresh", settings=fast_settings(units_per_process=1),
                            on_event=Recorder())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fresh.keep_warm)
        alone = [await fresh.run(task) for task in tasks[:2]]
        nursery.cancel_scope.cancel()
    assert [o.result for o in alone] == [o.result for o in outcomes[:2]]


async def test_a_units_scratch_files_are_gone_before_the_next_unit_runs_in_the_same_process(tmp_path):
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(), on_event=Recorder())
    path = write_plugin(tmp_path, "peek", PEEK)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(guests.keep_warm)
        outcomes = [await guests.run(make_task(path, {"nest": i == 0}, task_id=f"n0de0001-1.{i}")) for i in range(2)]
        # A unit that leaves a thread behind: its process is not reused, the thread would run on.
        lingering = [await guests.run(make_task(path, {"linger": True}, task_id=f"n0de0001-1.{i}")) for i in (2, 3)]
        # Pausing ends the waiting process: the owner wants the machine back.
        guests.pause_all()
        await wait_until(lambda: guest_processes() == [], what="the waiting process to end on pause")
        nursery.cancel_scope.cancel()
    first, second = (outcome.value() for outcome in outcomes)
    assert first["pid"] == second["pid"]
    third, fourth = (outcome.value() for outcome in lingering)
    assert third["pid"] == first["pid"] != fourth["pid"]
    assert first["seen"] == second["seen"] == ["out"]  # not the first unit's left-behind.txt, nor its deep/


async def test_an_owner_evict_ends_waiting_and_warm_guests_and_the_next_unit_gets_a_fresh_process(tmp_path):
    recorder = Recorder()
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(), on_event=recorder)
    path = write_plugin(tmp_path, "counter", COUNTER)
    tasks = iter(make_task(path, {"n": 3}, task_id=f"n0de0001-1.{i}") for i in range(10))

    async def one_waiting() -> psutil.Process:
        assert isinstance(await guests.run(next(tasks)), Completed)
        (waiting,) = guest_processes()
        await wait_until(lambda: waiting.status() == psutil.STATUS_SLEEPING, what="blocked on its pipe")
        return waiting

    async with trio.open_nursery() as nursery:
        nursery.start_soon(guests.keep_warm)
        # The owner's evict frees everything, the waiting process too.
        await one_waiting()
        await guests.evict()
        assert guest_processes() == []

        # An evict during a warm unit frees the CPU; the next unit gets a fresh process.
        waiting = await one_waiting()
        long_task = make_task(path, LONG, task_id="n0de0001-1.9")
        evicted = []

        async def run_long() -> None:
            evicted.append(await guests.run(long_task))

        nursery.start_soon(run_long)
        await wait_until(lambda: [f for f in guests.figures() if f.progress > 0], what="the warm unit's progress")
        assert guests.guest_pids() == (waiting.pid,)
        await guests.evict()
        await wait_until(lambda: evicted)
        assert isinstance(evicted[0], Evicted)
        assert guest_processes() == []
        assert isinstance(await guests.run(next(tasks)), Completed)
        assert started_pids(recorder)[-1] not in (waiting.pid, *started_pids(recorder)[:-1])
        # No next unit comes: the waiting process ends after the idle timeout (WARM_IDLE_SECONDS).
        (waiting,) = guest_processes()
        await wait_until(lambda: guest_processes() == [], what="the idle timeout to end the waiting process")
        nursery.cancel_scope.cancel()
    assert guest_processes() == []
