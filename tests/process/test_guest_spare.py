"""The warm spare: a guest process started ahead, at guest priority, that the next unit runs in."""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import signal
import textwrap
from pathlib import Path

import psutil
import pytest
import trio

from frost_core.guest import Completed, Evicted, GuestSupervisor, handoff
from frost_core.guest.cgroups import current_mounts
from frost_core.guest.limits import address_space_cap
from tests.guest_kit import (
    COUNTER, HEADER, MIB, Recorder, counter_result, fast_settings, guest_processes, make_task, write_plugin,
)
from tests.guest_kit import LONG
from tests.waiting import wait_until
from tests.process.containment import require_containment
from tests.process.guests import spare_processes


def spares() -> list[psutil.Process]:
    return spare_processes(os.getpid())


def dead(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_a_unit_runs_in_the_waiting_spare_lowered_and_capped_and_a_new_spare_follows(tmp_path):
    settings = fast_settings(warm_spare=True)
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=settings, on_event=Recorder())
    path = write_plugin(tmp_path, "counter", COUNTER)
    task = make_task(path, LONG)
    outcomes = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(guests.keep_warm)
        (spare,) = await wait_until(spares)
        await wait_until(lambda: spare.nice() == 19)  # it lowers itself before it waits, not when its unit comes
        if hasattr(os, "SCHED_IDLE"):
            assert os.sched_getscheduler(spare.pid) in (os.SCHED_IDLE, os.SCHED_OTHER)  # OTHER where refused
        assert guests.guest_pids() == ()  # waiting, it is no guest: it runs no unit and uses no CPU

        async def run() -> None:
            outcomes.append(await guests.run(task))

        nursery.start_soon(run)
        # The spare became the guest: in the unit's scratch folder, with the unit's memory cap.
        scratch = tmp_path / "node" / "scratch" / task.task_id
        await wait_until(lambda: Path(spare.cwd()) == scratch)
        cap = address_space_cap(task.unit.memory_bytes, settings.address_space_baseline_bytes)
        # It moves into the folder first and caps itself a moment later.
        await wait_until(lambda: _address_space_limits(spare.pid) == (cap, cap), what="the unit's memory cap")
        # The old spare leaves its folder a moment after its unit arrives: look for the new one only.
        (successor,) = await wait_until(lambda: len(new := [p for p in spares() if p.pid != spare.pid]) == 1 and new)
        await wait_until(lambda: outcomes)
        nursery.cancel_scope.cancel()
    assert isinstance(outcomes[0], Completed)
    assert outcomes[0].value() == counter_result(path, LONG)
    assert guest_processes() == []  # the spare is stopped with the supervisor's keep_warm


async def test_an_assignments_first_units_on_two_cpus_both_start_in_waiting_spares(tmp_path):
    # One spare per guest CPU: with a single one, the second unit started its interpreter from nothing at the
    # lowest priority while holding its CPU's slot, and a run's first results went through one process.
    recorder = Recorder()
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(warm_spare=True, spares=2),
                             on_event=recorder)
    path = write_plugin(tmp_path, "counter", COUNTER)
    tasks = [make_task(path, {"n": 5}, task_id=f"n0de0001-1.{i}") for i in range(2)]
    outcomes = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(guests.keep_warm)
        waiting = await wait_until(lambda: len(found := spares()) == 2 and found, what="two spares")

        async def run(task) -> None:
            outcomes.append(await guests.run(task))

        for task in tasks:
            nursery.start_soon(run, task)
        await wait_until(lambda: len(outcomes) == 2)
        started = {int(m.split("(pid ")[1].rstrip(")")) for m in recorder.messages("start") if "(pid " in m}
        assert started == {p.pid for p in waiting}   # no unit started a process of its own
        await wait_until(lambda: len([p for p in spares() if p.pid not in {w.pid for w in waiting}]) == 2,
                         what="two new spares")
        nursery.cancel_scope.cancel()
    assert [o.value() for o in outcomes] == [counter_result(path, {"n": 5})] * 2
    assert guest_processes() == []


async def test_the_spare_waits_in_a_cgroup_of_its_own_and_its_unit_runs_there_under_the_units_memory_limit(tmp_path):
    require_containment()
    settings = fast_settings(warm_spare=True)
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=settings, on_event=Recorder())
    path = write_plugin(tmp_path, "counter", COUNTER)
    task = make_task(path, LONG)
    outcomes = []
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(guests.keep_warm)
            (spare,) = await wait_until(spares)
            # Contained before any unit comes (a move-in then skips making the cgroup), not yet capped.
            waiting_in = await wait_until(lambda: _memory_cgroup(spare), what="the spare's own cgroup")
            assert waiting_in.name == f"guest-{spare.pid}"
            assert int((waiting_in / "memory.limit_in_bytes").read_text()) > 1 << 50

            async def run() -> None:
                outcomes.append(await guests.run(task))

            nursery.start_soon(run)
            limit = task.unit.memory_bytes + settings.memory_slack_bytes
            await wait_until(lambda: int((waiting_in / "memory.limit_in_bytes").read_text()) == limit,
                             what="the unit's memory limit on the spare's cgroup")
            assert _memory_cgroup(spare) == waiting_in
            await wait_until(lambda: outcomes, timeout=60)
            nursery.cancel_scope.cancel()
    finally:
        guests.close()
    assert isinstance(outcomes[0], Completed)
    assert outcomes[0].value() == counter_result(path, LONG)
    assert not waiting_in.exists()  # removed with its process


def _memory_cgroup(process: psutil.Process) -> Path | None:
    """The folder of the memory cgroup `process` is in when it is a guest's own (guest-PID), else None."""
    line = next(line for line in Path(f"/proc/{process.pid}/cgroup").read_text().splitlines() if ":memory:" in line)
    folder = current_mounts().v1_roots["memory"] / line.partition(":memory:/")[2]
    return folder if folder.name.startswith("guest-") else None


async def test_a_spare_killed_from_outside_is_replaced_and_units_still_run(tmp_path):
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(warm_spare=True),
                             on_event=Recorder())
    path = write_plugin(tmp_path, "counter", COUNTER)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(guests.keep_warm)
        (spare,) = await wait_until(spares)
        os.kill(spare.pid, signal.SIGKILL)
        await wait_until(lambda: dead(spare))
        outcome = await guests.run(make_task(path, {"n": 5}))
        assert isinstance(outcome, Completed)
        assert outcome.value() == counter_result(path, {"n": 5})
        (replacement,) = await wait_until(spares)
        assert replacement.pid != spare.pid
        nursery.cancel_scope.cancel()
    assert guest_processes() == []


async def test_turning_the_spare_off_stops_it(tmp_path):
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(warm_spare=True),
                             on_event=Recorder())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(guests.keep_warm)
        await wait_until(spares)
        guests.update_settings(fast_settings(warm_spare=False))
        await wait_until(lambda: not spares(), timeout=15)
        nursery.cancel_scope.cancel()


def _address_space_limits(pid: int) -> tuple[int | None, int | None]:
    """The soft and hard RLIMIT_AS of `pid`, as /proc shows them (None for "unlimited": a spare not yet
    capped, which a loaded machine shows between its move into the unit's folder and its cap): prlimit()
    on a guest that runs as another user needs CAP_SYS_RESOURCE, which a root node in a container may lack."""
    line = next(line for line in Path(f"/proc/{pid}/limits").read_text().splitlines() if line.startswith("Max address"))
    soft, hard = line.split()[3:5]
    return _limit(soft), _limit(hard)


def _limit(text: str) -> int | None:
    return None if text == "unlimited" else int(text)


# A unit whose state is a few MiB of bytes that every step changes: any byte lost or changed on a
# hand-over changes its result.
ROLLING = HEADER + textwrap.dedent(
    """
    import hashlib

    class Rolling(Plugin):
        name = "rolling"
        version = "1"

        def start(self, unit):
            return {"i": 0, "n": unit.data["n"], "blob": bytes(range(256)) * (unit.data["size"] // 256)}

        def step(self, state):
            i, blob = state["i"], state["blob"]
            if i >= state["n"]:
                return Done({"sha256": hashlib.sha256(blob).hexdigest(), "n": i})
            return {**state, "i": i + 1, "blob": blob[32:] + hashlib.sha256(blob[-4096:] + bytes([i % 256])).digest()}

        def progress(self, state):
            return state["i"] / state["n"]

        def split(self, params):
            return []

        def combine(self, params, results):
            return None

    plugin = Rolling()
    """
)


def rolling_result(n: int, size: int) -> dict:
    blob = bytes(range(256)) * (size // 256)
    for i in range(n):
        blob = blob[32:] + hashlib.sha256(blob[-4096:] + bytes([i % 256])).digest()
    return {"sha256": hashlib.sha256(blob).hexdigest(), "n": n}


@pytest.mark.parametrize("way", ["memfd", "memfd-fails", "no-memfd-here"])
async def test_a_unit_resumed_in_the_spare_gets_its_state_handed_over_and_ends_bit_identical(tmp_path, monkeypatch,
                                                                                           caplog, way):
    handed = []

    def sealed_state(state):
        handed.append(len(state))
        if way == "memfd-fails":
            raise OSError("no memfd today")
        return handoff.sealed_state(state)

    monkeypatch.setattr("frost_core.guest.running.sealed_state", sealed_state)
    if way == "no-memfd-here":
        monkeypatch.setattr(handoff, "AVAILABLE", False)  # as on macOS: guests get no hand-off socket at all
    caplog.set_level(logging.DEBUG, logger="frost.guest")
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(warm_spare=True), on_event=Recorder())
    path = write_plugin(tmp_path, "rolling", ROLLING)
    data = {"n": 400, "size": 3 * MIB}
    task = make_task(path, data, memory=64 * MIB)
    outcomes = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(guests.keep_warm)

        async def run() -> None:
            outcomes.append(await guests.run(task))

        nursery.start_soon(run)
        await wait_until(lambda: any(f.last_checkpoint_seq and f.progress > 0 for f in guests.figures()))
        assert await guests.evict(task.task_id) == (task.task_id,)
        await wait_until(lambda: outcomes)
        (evicted,) = outcomes
        assert isinstance(evicted, Evicted) and evicted.checkpoint is not None and evicted.checkpoint.size > 3 * MIB

        (spare,) = await wait_until(spares, what="a spare for the unit's second start")
        nursery.start_soon(run)
        await wait_until(lambda: Path(spare.cwd()).name == task.task_id, what="the spare taking the unit")
        # Running again (its progress past where it was evicted): the guest holds nothing of the hand-over.
        await wait_until(lambda: any(f.progress > evicted.progress for f in guests.figures()) or len(outcomes) == 2)
        if len(outcomes) < 2:
            assert not [link for link in _fd_links(spare.pid) if "frost-state" in link]
            assert "frost-state" not in Path(f"/proc/{spare.pid}/maps").read_text()
        await wait_until(lambda: len(outcomes) == 2, timeout=90)
        nursery.cancel_scope.cancel()
    finished = outcomes[1]
    assert isinstance(finished, Completed)
    assert finished.value() == rolling_result(**data)
    piped = [r.getMessage() for r in caplog.records if "goes through the pipe" in r.getMessage()]
    if way == "memfd":
        assert handed == [evicted.checkpoint.size] and not piped
    elif way == "memfd-fails":
        assert handed == [evicted.checkpoint.size] and piped == [f"task {task.task_id}: its state goes through the pipe: "
                                                                 "no memfd today"]
    else:
        assert handed == [] and not piped


def _fd_links(pid: int) -> list[str]:
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            continue
    return links


async def test_a_moved_in_state_is_copied_into_its_memfd_while_it_is_made_durable_and_the_unit_ends_bit_identical(
        tmp_path, monkeypatch):
    copied = trio.Event()
    token = trio.lowlevel.current_trio_token()

    def sealed_state(state):
        fd = handoff.sealed_state(state)
        trio.from_thread.run_sync(copied.set, trio_token=token)
        return fd

    monkeypatch.setattr("frost_core.guest.running.sealed_state", sealed_state)
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(), on_event=Recorder())
    path = write_plugin(tmp_path, "rolling", ROLLING)
    data = {"n": 4000, "size": 2 * MIB}
    task = make_task(path, data, memory=64 * MIB)
    outcomes, overlapped = [], []

    async def durable() -> None:
        # What a move's destination does here is sync the arrived checkpoint: the copy for the guest goes beside it.
        with trio.move_on_after(10):
            await copied.wait()
        overlapped.append(copied.is_set())

    async with trio.open_nursery() as nursery:
        async def run(**arrived) -> None:
            outcomes.append(await guests.run(task, **arrived))

        nursery.start_soon(run)
        await wait_until(lambda: any(f.progress > 0 for f in guests.figures()))
        assert await guests.evict(task.task_id) == (task.task_id,)
        await wait_until(lambda: outcomes)
        (evicted,) = outcomes
        assert isinstance(evicted, Evicted) and evicted.checkpoint is not None
        nursery.start_soon(functools.partial(run, checkpoint=evicted.checkpoint, durable=durable))
        await wait_until(lambda: len(outcomes) == 2, timeout=90)
    assert overlapped == [True]
    assert isinstance(outcomes[1], Completed) and outcomes[1].value() == rolling_result(**data)
