"""The supervisor with real guest subprocesses: results, kills and restarts, pause, evict, checkpoints, figures."""

from __future__ import annotations

import random
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest
import trio

from frost_core.guest import Completed, Evicted, Failed, GuestSettings, GuestSupervisor, GuestTask, Stopped
from frost_core.guest.spawn import close_child
from frost_core.storage.checkpoints import CheckpointStore, read_record
from frost_core.wire.channel import Channel
from tests.guest_kit import (
    BALLAST, COUNTER, LONG, MIB, Recorder, counter_result, fast_settings, guest_cpu, guest_processes, make_task,
    write_plugin,
)
from tests.waiting import wait_until


def long_counter(tmp_path: Path) -> tuple[Recorder, GuestSupervisor, Path, GuestTask]:
    """A supervisor with quick checkpoints whose events are recorded, the counter plugin's file and its long unit."""
    recorder = Recorder()
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(), on_event=recorder)
    path = write_plugin(tmp_path, "counter", COUNTER)
    return recorder, guests, path, make_task(path, LONG)


async def run_into(outcomes: list, guests: GuestSupervisor, task) -> None:
    """Run `task` and keep its outcome in `outcomes`, for the test to look at once its nursery is done."""
    outcomes.append(await guests.run(task))


@pytest.mark.parametrize("proc_stat", [True, False], ids=["proc", "psutil-as-on-macos"])
async def test_a_unit_runs_to_its_result_with_checkpoints_and_live_figures(tmp_path, monkeypatch, proc_stat):
    monkeypatch.setattr("frost_core.guest.running.PROC_STAT", proc_stat)   # without /proc, CPU comes from psutil
    recorder, guests, path, task = long_counter(tmp_path)
    seen = []
    async with trio.open_nursery() as nursery:
        outcome_box = []

        nursery.start_soon(run_into, outcome_box, guests, task)
        # Live: checkpointed and part way (a look at the very end of its last step sees progress 1.0).
        figures = await wait_until(lambda: [f for f in guests.figures() if f.last_checkpoint_seq and 0 < f.progress < 1])
        seen.append(figures[0])
    outcome = outcome_box[0]
    assert isinstance(outcome, Completed)
    assert outcome.value() == counter_result(path, LONG)
    live = seen[0]
    identity = (live.task_id, live.assignment_id, live.plugin, live.origin)
    assert identity == (task.task_id, "n0de0001-1", "counter", "n0de0001")
    assert live.state in ("running", "checkpointing")
    assert 0 < live.progress < 1 and live.cpu_seconds > 0 and live.memory_bytes > 0 and live.checkpoint_bytes > 0
    assert 0 <= live.cpu_percent <= 100 * 1.5  # one busy thread: at most a core, plus sampling jitter
    assert recorder.messages("checkpoint")
    assert guests.figures() == ()
    assert guest_processes() == []


async def test_kill_9_at_random_moments_then_restart_gives_the_identical_result(tmp_path):
    recorder, guests, path, task = long_counter(tmp_path)
    rng = random.Random(7)
    kills = 0
    for _attempt in range(40):
        outcome_box = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_into, outcome_box, guests, task)
            if kills < 3:
                # Kill at a random moment once the guest is under way (after its first checkpoint).
                await wait_until(lambda: any(f.last_checkpoint_seq for f in guests.figures()) or outcome_box)
                await trio.sleep(rng.uniform(0.0, 0.2))
                for process in guest_processes():
                    process.send_signal(signal.SIGKILL)
                    kills += 1
        outcome = outcome_box[0]
        if isinstance(outcome, Completed):
            break
        assert isinstance(outcome, Failed) and outcome.retryable
        assert outcome.reason.startswith("crashed: the guest was killed by SIGKILL")
    assert isinstance(outcome, Completed)
    assert outcome.value() == counter_result(path, LONG)
    assert kills >= 1
    assert any("from checkpoint" in m for m in recorder.messages("start"))


async def test_pause_stops_the_guest_and_evict_sends_it_away_with_a_checkpoint(tmp_path):
    recorder, guests, path, task = long_counter(tmp_path)
    outcome_box = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_into, outcome_box, guests, task)
        await wait_until(lambda: any(f.state == "running" and f.cpu_seconds > 0.05 for f in guests.figures()))
        [process] = guest_processes()

        guests.pause_all()
        assert [f.state for f in guests.figures()] == ["paused"]
        await trio.sleep(0.1)
        frozen = guest_cpu(process)
        await trio.sleep(0.4)
        assert guest_cpu(process) == frozen  # no CPU at all while paused
        # Frozen in its cgroup (the kernel shows disk-sleep), or stopped by signal where there is no freezer.
        assert process.status() in (psutil.STATUS_DISK_SLEEP, psutil.STATUS_STOPPED)

        guests.resume_all()
        await wait_until(lambda: guest_cpu(process) > frozen)

        guests.pause_all()  # evicting a paused guest must still work
        evicted = await guests.evict()
        assert evicted == (task.task_id,)
        assert not process.is_running()
    outcome = outcome_box[0]
    assert isinstance(outcome, Evicted) and outcome.checkpoint is not None
    assert guests.store.latest(task.task_id) == outcome.checkpoint
    guests.resume_all()

    # The unit resumes from the eviction's checkpoint and still gives the identical result.
    again = await guests.run(task)
    assert isinstance(again, Completed) and again.value() == counter_result(path, LONG)
    assert any(f"from checkpoint {outcome.checkpoint.seq}" in m for m in recorder.messages("start"))


async def test_an_answer_asked_for_before_an_eviction_and_sent_after_it_began_is_the_evictions_checkpoint(tmp_path):
    # The guest is slow to answer (stopped from outside here, as a starved one is): the request goes out before the
    # eviction, so the guest hashes its state (1 MiB) and sends the hash after it, and the eviction's loop takes the
    # answer. Periodic checkpoints out of the way, so the one taken is the request's.
    guests = GuestSupervisor(
        data_dir=tmp_path / "node", settings=fast_settings(min_checkpoint_interval=600, max_checkpoint_interval=600),
        on_event=Recorder(),
    )
    path = write_plugin(tmp_path, "ballast", BALLAST)
    data = {"n": 1500, "mib": 1}
    task = make_task(path, data, memory=32 * MIB)
    outcome_box, asked = [], []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_into, outcome_box, guests, task)
        await wait_until(lambda: any(f.state == "running" and f.progress > 0 for f in guests.figures()))
        [process] = guest_processes()
        process.suspend()

        async def checkpoint_now() -> None:
            asked.append(await guests.checkpoint_now(task.task_id, deadline=60))

        nursery.start_soon(checkpoint_now)
        await trio.sleep(0.2)
        nursery.start_soon(guests.evict)
        await wait_until(lambda: [f.state for f in guests.figures()] == ["evicting"])
        process.resume()
    [outcome] = outcome_box
    assert isinstance(outcome, Evicted) and outcome.checkpoint is not None, outcome
    assert asked == [outcome.checkpoint] and outcome.checkpoint.seq == 1
    assert guests.store.latest(task.task_id) == outcome.checkpoint  # whole, its hash checked

    again = await guests.run(task)
    assert isinstance(again, Completed) and again.value() == counter_result(path, data)


def test_figures_outside_a_trio_run_are_empty(tmp_path):
    # The node builds its first snapshot before trio runs; guests exist only inside the run.
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=GuestSettings(), on_event=Recorder())
    assert guests.figures() == ()


@pytest.mark.parametrize("staged", [False, True], ids=["written-whole", "written-while-it-arrives"])
async def test_capture_returns_the_moves_checkpoint_and_the_run_ends_evicted_with_it(tmp_path, monkeypatch, staged):
    if staged:  # the path of a state from 8 MiB on, taken here by the counter's few bytes
        monkeypatch.setattr("frost_core.guest.running.STAGE_FROM", 0)
    # Periodic checkpoints out of the way, so the one captured is the capture's own.
    guests = GuestSupervisor(
        data_dir=tmp_path / "node", settings=fast_settings(min_checkpoint_interval=600, max_checkpoint_interval=600),
        on_event=Recorder(),
    )
    path = write_plugin(tmp_path, "counter", COUNTER)
    task = make_task(path, LONG)
    outcome_box = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_into, outcome_box, guests, task)
        await wait_until(lambda: any(f.state == "running" and f.progress > 0 for f in guests.figures()))
        captured = await guests.capture(task.task_id, deadline=60)
        assert guest_processes() == []  # stopped, not just asked
    assert captured is not None and captured.seq == 1 and captured.size > 0
    (outcome,) = outcome_box
    assert isinstance(outcome, Evicted) and outcome.checkpoint == captured
    assert guests.store.latest(task.task_id) == captured  # durable here until a destination runs it
    assert [read_record(p) for p in (guests.store.root / task.task_id).iterdir()] == [captured]
    with pytest.raises(KeyError):
        await guests.capture(task.task_id, deadline=1)  # nothing runs any more


async def test_an_evicted_unit_goes_on_before_its_killed_process_is_reaped_and_comes_back_after(tmp_path, monkeypatch):
    let_go = trio.Event()
    real_close = close_child

    async def slow_to_exit(child):  # a killed process at the lowest priority, on a busy machine
        await let_go.wait()
        await real_close(child)

    monkeypatch.setattr("frost_core.guest.running.close_child", slow_to_exit)
    # Periodic checkpoints out of the way, so the one captured is the capture's own.
    guests = GuestSupervisor(
        data_dir=tmp_path / "node", settings=fast_settings(min_checkpoint_interval=600, max_checkpoint_interval=600),
        on_event=Recorder(),
    )
    task = make_task(write_plugin(tmp_path, "counter", COUNTER), LONG)
    first, second = [], []

    async def run(box):
        box.append(await guests.run(task))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(guests.keep_warm)  # as the node runs it: the reaps of evicted guests go there
        nursery.start_soon(run, first)
        await wait_until(lambda: any(f.state == "running" for f in guests.figures()))
        captured = await guests.capture(task.task_id, deadline=60)
        try:
            await wait_until(lambda: first, timeout=10, what="the evicted outcome while its process is not reaped")
            assert isinstance(first[0], Evicted) and first[0].checkpoint == captured
            nursery.start_soon(run, second)  # back here (a move that failed): its scratch folder is being let go
            await trio.sleep(0.3)
            assert guests.figures() == ()
        finally:
            let_go.set()
        await wait_until(lambda: any(f.state == "running" for f in guests.figures()), what="the unit running again")
        await guests.evict(task.task_id)
        await wait_until(lambda: second, what="its second outcome")
        nursery.cancel_scope.cancel()
    assert isinstance(second[0], Evicted) and second[0].checkpoint.seq == captured.seq + 1
    await wait_until(lambda: not guest_processes(), what="every guest process reaped")


class _GuestWakeups(trio.abc.Instrument):
    """Counts the steps of a running guest's own tasks (watcher, checkpoint timer, pipe readers)."""

    def __init__(self) -> None:
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if "RunningGuest." in task.name:
            self.steps += 1


async def test_a_guest_paused_while_its_process_starts_is_stopped_once_it_has_one(tmp_path):
    # The owner's pause may come between a guest's registration and its process getting the unit.
    recorder, guests, path, task = long_counter(tmp_path)
    outcome_box = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_into, outcome_box, guests, task)
        await trio.testing.wait_all_tasks_blocked()
        assert [f.state for f in guests.figures()] == ["starting"] and recorder.messages("start") == []
        guests.pause_all()
        await wait_until(lambda: recorder.messages("start"), what="the guest process given its unit")
        [process] = guest_processes()
        # Frozen in its cgroup (the kernel shows disk-sleep), or stopped by signal where there is no freezer.
        await wait_until(lambda: process.status() in (psutil.STATUS_DISK_SLEEP, psutil.STATUS_STOPPED),
                         timeout=10, what="the paused guest stopped")
        stopped = guest_cpu(process)
        await trio.sleep(0.5)
        assert guest_cpu(process) == stopped
        [paused] = guests.figures()
        assert paused.state == "paused" and paused.progress == 0

        guests.resume_all()
    [outcome] = outcome_box
    assert isinstance(outcome, Completed) and outcome.value() == counter_result(path, LONG)


async def test_a_paused_guest_leaves_the_loop_asleep_for_an_hour_of_mock_time(tmp_path, mock_clock):
    # The product's default settings (a watch every 0.1 s): polling while paused would wake the
    # loop ~36,000 times in the hour below.
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=GuestSettings(), on_event=Recorder())
    path = write_plugin(tmp_path, "counter", COUNTER)
    task = make_task(path, LONG)
    mock_clock.rate = 1.0  # the guest starts in real time
    async with trio.open_nursery() as nursery:
        nursery.start_soon(guests.run, task)
        # Started is enough (a starved idle-priority guest may take long to show CPU on a busy box).
        [process] = await wait_until(guest_processes, what="the guest process")
        guests.pause_all()
        mock_clock.rate = 0.0  # from here on only the jumps below move the clock
        await trio.to_thread.run_sync(time.sleep, 0.3)  # what it wrote before it stopped reaches the pipe...
        await trio.testing.wait_all_tasks_blocked()  # ...and is read before the count starts
        wakeups = _GuestWakeups()
        trio.lowlevel.add_instrument(wakeups)
        for _minute in range(60):
            mock_clock.jump(60)
            await trio.testing.wait_all_tasks_blocked()
        trio.lowlevel.remove_instrument(wakeups)
        assert wakeups.steps <= 3, f"a paused guest woke the loop {wakeups.steps} times in an hour"
        [paused] = guests.figures()
        assert paused.state == "paused"
        assert paused.wall_seconds >= 3600  # the supervisor keeps time by trio's clock, the mock one here

        mock_clock.rate = 1.0
        guests.resume_all()  # and it runs again, watched, once resumed
        assert guests.figures()[0].state in ("starting", "running", "checkpointing")
        await wait_until(lambda: process.status() != psutil.STATUS_STOPPED, what="the guest to run again")
        await guests.stop((task.task_id,), "the test is over")


async def test_checkpoint_now_gives_a_fresh_durable_checkpoint(tmp_path, monkeypatch):
    # ... read and made durable by one thread, not the loop: the loop wakes once, when it is durable.
    loop_reads, committed_in = [], []
    real_receive, real_commit = Channel.receive_bulk_data, CheckpointStore.commit

    async def receive_bulk_data(self, **kwargs):
        loop_reads.append(kwargs)
        return await real_receive(self, **kwargs)

    def commit(self, **kwargs):
        committed_in.append(threading.get_ident())
        return real_commit(self, **kwargs)

    monkeypatch.setattr(Channel, "receive_bulk_data", receive_bulk_data)
    monkeypatch.setattr(CheckpointStore, "commit", commit)
    guests = GuestSupervisor(
        data_dir=tmp_path / "node", settings=fast_settings(min_checkpoint_interval=600, max_checkpoint_interval=600),
        on_event=Recorder(),
    )
    task = make_task(write_plugin(tmp_path, "counter", COUNTER), LONG)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(guests.run, task)
        await wait_until(lambda: any(f.state == "running" for f in guests.figures()))
        first = await guests.checkpoint_now(task.task_id, deadline=60)
        second = await guests.checkpoint_now(task.task_id, deadline=60)
        assert first is not None and second is not None and second.seq == first.seq + 1
        assert guests.store.latest(task.task_id) == second
        [figures] = guests.figures()
        assert figures.last_checkpoint_seq == second.seq and figures.checkpoint_bytes == second.size
        assert loop_reads == [] and len(committed_in) == 2 and threading.get_ident() not in committed_in
        await guests.evict(task.task_id)
    with pytest.raises(KeyError):
        await guests.checkpoint_now(task.task_id)


async def test_a_scratch_folder_that_cannot_be_made_fails_the_unit_for_a_retry_and_the_next_unit_runs(
        tmp_path, monkeypatch):
    from frost_core.guest import supervisor as supervisor_module

    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(), on_event=Recorder())
    path = write_plugin(tmp_path, "counter", COUNTER)
    made = supervisor_module.fresh_folder

    def refuse_the_first(folder):  # as for a folder an earlier guest left that this node cannot remove
        monkeypatch.setattr(supervisor_module, "fresh_folder", made)
        raise PermissionError(13, "Permission denied", str(folder / "cache"))

    monkeypatch.setattr(supervisor_module, "fresh_folder", refuse_the_first)
    refused = await guests.run(make_task(path, {"n": 3}))
    assert isinstance(refused, Failed) and refused.retryable
    assert refused.reason.startswith("start: could not make its scratch folder: [Errno 13] Permission denied")
    assert guest_processes() == []
    assert isinstance(await guests.run(make_task(path, {"n": 3})), Completed)


async def test_a_checkpoint_from_a_newer_ownership_epoch_is_not_resumed(tmp_path):
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(), on_event=Recorder())
    path = write_plugin(tmp_path, "counter", COUNTER)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(guests.run, make_task(path, LONG, epoch=5))
        await wait_until(lambda: any(f.last_checkpoint_seq for f in guests.figures()))
        await guests.evict()
    outcome = await guests.run(make_task(path, LONG, epoch=4))
    assert isinstance(outcome, Failed) and not outcome.retryable
    assert "ownership epoch 5" in outcome.reason


async def test_cancelling_an_assignment_stops_its_guest_and_drops_its_checkpoints_without_calling_it_a_failure(
        tmp_path):
    recorder = Recorder()
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(), on_event=recorder)
    task = make_task(write_plugin(tmp_path, "counter", COUNTER), LONG)
    outcome_box = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_into, outcome_box, guests, task)
        await wait_until(lambda: any(f.last_checkpoint_seq for f in guests.figures()))
        assert await guests.cancel_assignment(task.assignment_id) == (task.task_id,)
        assert guest_processes() == []
    outcome = outcome_box[0]
    assert isinstance(outcome, Stopped) and outcome.reason.startswith("cancelled")
    assert guests.store.latest(task.task_id) is None
    # The owner asked for it: the event log says the guest stopped, and shows no error.
    assert recorder.messages("stopped") == [f"guest stopped: cancelled: assignment {task.assignment_id} was cancelled"]
    assert [e for e in recorder.events if e.level == "error"] == []
