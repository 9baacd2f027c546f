"""Guest priority and memory caps: the pure parts as tables, and a real guest against CPU hogs."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import trio

from frost_core.guest import GuestSupervisor
from frost_core.guest.limits import MIB, address_space_cap, memory_verdict
from frost_core.guest.priority import PriorityView
from tests.guest_kit import COUNTER, Recorder, fast_settings, guest_processes, make_task, write_plugin
from tests.guest_kit import guest_cpu
from tests.waiting import wait_until

FLOOR = PriorityView(nice=19, idle_policy=True, autogroup_nice=19)


@pytest.mark.parametrize(
    ("now", "raised"),
    [
        (PriorityView(nice=19, idle_policy=True, autogroup_nice=19), None),
        (PriorityView(nice=0, idle_policy=True, autogroup_nice=19), "nice 19 -> 0"),
        (PriorityView(nice=19, idle_policy=True, autogroup_nice=0), "autogroup nice 19 -> 0"),
        (PriorityView(nice=19, idle_policy=False, autogroup_nice=19), "scheduling policy SCHED_IDLE -> another"),
        (PriorityView(nice=None, idle_policy=None, autogroup_nice=None), None),  # an OS that cannot tell
    ],
)
def test_raising_priority_is_recognised(now, raised):
    assert now.raised_from(FLOOR) == raised


def test_a_floor_the_os_refused_is_not_held_against_the_guest():
    # Nice 10 where 19 was refused, no SCHED_IDLE, no autogroup: staying there is fine.
    floor = PriorityView(nice=10, idle_policy=False, autogroup_nice=None)
    assert PriorityView(nice=10, idle_policy=False, autogroup_nice=None).raised_from(floor) is None
    assert PriorityView(nice=5, idle_policy=False, autogroup_nice=None).raised_from(floor) == "nice 10 -> 5"


@pytest.mark.parametrize(
    ("rss", "declared", "slack", "over"),
    [(50 * MIB, 8 * MIB, 64 * MIB, False), (73 * MIB, 8 * MIB, 64 * MIB, True), (0, 0, 0, False)],
)
def test_memory_verdict(rss, declared, slack, over):
    verdict = memory_verdict(rss, declared, slack)
    assert (verdict is not None) == over
    if over:
        assert verdict.startswith("memory: the guest uses 73.0 MiB, over its declared 8.0 MiB")


def test_address_space_cap_adds_the_interpreter_baseline():
    assert address_space_cap(8 * MIB, 256 * MIB) == 264 * MIB
    assert address_space_cap(-1, 256 * MIB) == 256 * MIB


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux priority mechanisms")
def test_a_lowered_process_reports_every_step_and_stays_down():
    script = (
        "import os; from frost_core.guest.priority import enter_guest_priority, read_priority\n"
        "report = enter_guest_priority()\n"
        "print(report.summary()); print(read_priority(os.getpid()))\n"
    )
    output = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, start_new_session=True
    ).stdout
    summary, view = output.splitlines()
    assert "nice: ok" in summary and "sched_idle: ok" in summary and "rlimit_nice: ok" in summary
    assert "nice=19" in view and "idle_policy=True" in view


@pytest.mark.skipif(not os.path.exists("/proc/self/autogroup"), reason="the autogroup trap is Linux-only")
async def test_a_guest_gets_almost_nothing_against_cpu_hogs_in_another_session(tmp_path):
    """bench/guest_priority_share.py measures the exact share; here a robust bound of 10 % of a core."""
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(step_timeout=600), on_event=Recorder())
    task = make_task(write_plugin(tmp_path, "counter", COUNTER), {"n": 10**9, "spin": 2000})
    hogs: list[subprocess.Popen] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(guests.run, task)
        await wait_until(lambda: any(f.state == "running" for f in guests.figures()))
        [guest] = guest_processes()
        try:
            for _ in range(os.cpu_count() or 1):
                hogs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True))
            await trio.sleep(0.5)
            cpu_before, wall_before = guest_cpu(guest), time.monotonic()
            await trio.sleep(2.0)
            share = (guest_cpu(guest) - cpu_before) / (time.monotonic() - wall_before)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
        await guests.evict()
    assert share <= 0.10, f"guest got {share:.1%} of a core against hogs"

