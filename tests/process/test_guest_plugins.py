"""Broken plugins give a clear failure and leave a healthy supervisor; also the test plugins the guest tests share."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from frost_core.guest import Completed, Failed, GuestSupervisor

from tests.guest_kit import (
    MIB, COUNTER, FOREVER, NOT_CBOR, HUGE_STATE, GREEDY, RAISER, CRASHER, CLIMBER, AUTOGROUP_CLIMBER, SCRIBBLER, SYNTAX_ERROR, Recorder, fast_settings, write_plugin, make_task, counter_result, guest_processes,
)

@pytest.fixture
def supervisor(tmp_path) -> tuple[GuestSupervisor, Recorder]:
    recorder = Recorder()
    settings = fast_settings(max_state_bytes=16 * MIB)  # the plugins here test the limit, not big states
    return GuestSupervisor(data_dir=tmp_path / "node", settings=settings, on_event=recorder), recorder


# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "data", "memory", "reason"),
    [
        (NOT_CBOR, {}, 8 * MIB, "state: state holds a set, which is not plain CBOR data"),
        (HUGE_STATE, {}, 256 * MIB, "over the limit of 16777216 bytes"),
        (FOREVER, {}, 8 * MIB, "no progress: a step ran"),
        (RAISER, {}, 8 * MIB, "plugin: step() raised ValueError: row 7 has no pixels"),
        (GREEDY, {"mode": "at-once"}, 8 * MIB, "memory: the guest ran out of its"),
        (GREEDY, {"mode": "creeping"}, 8 * MIB, "memory: the guest"),  # its memory cgroup or the RSS watch
        (SYNTAX_ERROR, {}, 8 * MIB, "syntax error"),
        (SCRIBBLER, {}, 8 * MIB, "protocol: the guest broke the pipe protocol: unknown message code"),
    ],
    ids=["not-cbor", "huge-state", "infinite-loop", "raises", "memory-at-once", "memory-creeping", "syntax-error",
         "scribbles-on-the-pipe"],
)
async def test_a_broken_plugin_fails_clearly_and_the_supervisor_stays_healthy(
    tmp_path, supervisor, source, data, memory, reason
):
    guests, recorder = supervisor
    bad = make_task(write_plugin(tmp_path, "bad", source), data, memory=memory, task_id="n0de0001-1.0")
    outcome = await guests.run(bad)
    assert isinstance(outcome, Failed)
    assert reason in outcome.reason
    # Only the kernel's memory-cgroup kill is retried (per guests.max_retries); the plugin's own faults are not.
    assert outcome.retryable is outcome.reason.startswith("memory: the guest was killed by its memory cgroup")
    assert recorder.messages("failed") == [outcome.reason]
    assert guest_processes() == []

    counter = write_plugin(tmp_path, "counter", COUNTER)
    healthy = await guests.run(make_task(counter, {"n": 5}, task_id="n0de0001-2.0"))
    assert isinstance(healthy, Completed)
    assert healthy.value() == counter_result(counter, {"n": 5})


async def test_a_crashing_guest_is_reported_and_may_be_retried(tmp_path, supervisor):
    guests, _ = supervisor
    outcome = await guests.run(make_task(write_plugin(tmp_path, "crasher", CRASHER)))
    assert isinstance(outcome, Failed)
    assert outcome.reason.startswith("crashed: the guest exited with code 7")
    assert outcome.retryable is True


async def test_plugin_output_goes_to_the_event_log_without_corrupting_the_pipe(tmp_path, supervisor):
    guests, recorder = supervisor
    path = write_plugin(tmp_path, "counter", COUNTER)
    outcome = await guests.run(make_task(path, {"n": 4, "talk": True}))
    assert isinstance(outcome, Completed) and outcome.value() == counter_result(path, {"n": 4})
    assert [m for m in recorder.messages("guest-log") if m.startswith("row")] == [f"row {i} done" for i in range(4)]


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux scheduling policies")
async def test_a_guest_cannot_raise_its_priority_again(tmp_path, supervisor):
    guests, _ = supervisor
    outcome = await guests.run(make_task(write_plugin(tmp_path, "climber", CLIMBER)))
    assert isinstance(outcome, Completed)
    assert outcome.value() == {
        "attempts": {"setpriority": "refused", "nice": "refused", "sched_other": "refused"},
        "nice": 19,
        "idle": True,
    }


@pytest.mark.skipif(not Path("/proc/self/autogroup").exists(), reason="Linux autogroups")
async def test_a_guest_that_raises_its_autogroup_is_stopped_or_refused(tmp_path, supervisor):
    guests, _ = supervisor
    outcome = await guests.run(make_task(write_plugin(tmp_path, "autogroup", AUTOGROUP_CLIMBER)))
    if guests.isolation().landlock_abi:
        # Landlock keeps /proc/self/autogroup read-only for the guest: the attempt fails inside it.
        assert isinstance(outcome, Completed) and "Permission denied" in outcome.value()["refused"]
    else:
        assert isinstance(outcome, Failed)
        assert outcome.reason.startswith("priority: the guest raised its priority (autogroup nice 19 -> 0)")
    assert guest_processes() == []
