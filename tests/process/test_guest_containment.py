"""Guests in real cgroups: behind hogs in another cgroup, frozen whole for a pause, killed by their memory limit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import trio

from frost_core.guest import Completed, Failed, GuestSupervisor
from frost_core.guest.cgroups import PARENT_PREFIX, current_mounts, open_guest_cgroups
from frost_core.guest.confine import guest_user
from tests.guest_kit import COUNTER, GREEDY, HEADER, MIB, Recorder, counter_result, fast_settings, guest_processes
from tests.guest_kit import make_task, write_plugin
from tests.process.containment import cpuacct_seconds, move, own_cgroup, require_containment
from tests.waiting import wait_for, wait_until

FORKER = COUNTER.replace(
    "    def start(self, unit):\n",
    "    def start(self, unit):\n"
    "        import os\n"
    "        if os.fork() == 0:  # a child that spins and never reports: only the cgroup knows it\n"
    "            while True:\n"
    "                pass\n",
).replace(
    "    def step(self, state):\n",
    "    def step(self, state):\n"
    "        import time\n"
    "        time.sleep(0.02)  # long enough in wall time to be paused mid-way, short in CPU\n",
)
assert FORKER.count("os.fork()") == 1 and FORKER.count("time.sleep") == 1


async def test_guests_get_almost_no_cpu_against_hogs_in_another_cgroup_of_equal_weight(tmp_path):
    require_containment()
    cores = os.cpu_count() or 1
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(step_timeout=600), on_event=Recorder())
    original = {c: current_mounts().v1[c] for c in ("cpu", "cpuacct")}
    hogs: list[subprocess.Popen] = []
    with own_cgroup("cpu", "node") as node_cpu, own_cgroup("cpuacct", "node") as node_acct, \
            own_cgroup("cpu", "hogs") as hogs_cpu:
        assert (node_cpu / "cpu.shares").read_text() == (hogs_cpu / "cpu.shares").read_text()  # equal weight
        move(os.getpid(), node_cpu)  # this test process is the node, as systemd puts a service in its own cgroup
        move(os.getpid(), node_acct)
        try:
            tasks = [make_task(write_plugin(tmp_path, "counter", COUNTER), {"n": 10**9, "spin": 2000},
                               task_id=f"n0de0001-1.{i}") for i in range(cores)]
            async with trio.open_nursery() as nursery:
                for task in tasks:
                    nursery.start_soon(guests.run, task)
                # Started and wanting the CPU is enough: on a loaded machine they may not get any before the hogs come.
                running = await wait_until(lambda: len(guest_processes()) == cores and guest_processes(), timeout=60,
                                           what="a guest per core")
                allowed = sorted(os.sched_getaffinity(0))
                for core in (allowed[i % len(allowed)] for i in range(cores)):
                    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    hogs.append(hog)
                    move(hog.pid, hogs_cpu)
                    # One on each core, the whole time: left to the balancer, two hogs may share a core a while,
                    # and the core left free is the guests' to take, rightly (the likely cause of a CI run's 12.6 %).
                    os.sched_setaffinity(hog.pid, {core})
                await trio.sleep(0.5)
                parents = [p for p in node_acct.iterdir() if p.name.startswith(PARENT_PREFIX)]
                assert parents, "the guests' cgroups are not under the node's"
                before, runnable = cpuacct_seconds(parents), set()
                for _ in range(25):
                    await trio.sleep(0.2)
                    runnable |= {p.pid for p in running if p.status() == psutil.STATUS_RUNNING}
                share = cpuacct_seconds(parents) - before
                assert runnable == {p.pid for p in running}  # each wanted the CPU during the measurement
                nursery.cancel_scope.cancel()
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
            guests.close()
            move(os.getpid(), original["cpu"])
            move(os.getpid(), original["cpuacct"])
    assert share / 5.0 <= 0.05, f"the guests took {share / 5.0:.1%} of a core from hogs in another cgroup"


async def test_pause_freezes_every_process_of_a_guest_and_resume_thaws_it_with_the_same_result(tmp_path):
    require_containment()
    data = {"n": 100, "spin": 100}
    events = Recorder()
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(step_timeout=600), on_event=events)
    path = write_plugin(tmp_path, "forker", FORKER)
    outcomes = []

    def cpu_of(processes: list[psutil.Process]) -> float:
        return sum(sum(p.cpu_times()[:2]) for p in processes)

    try:
        async with trio.open_nursery() as nursery:
            async def run() -> None:
                outcomes.append(await guests.run(make_task(path, data)))

            nursery.start_soon(run)
            processes = await wait_until(lambda: len(guest_processes()) == 2 and guest_processes(), timeout=120,
                                         what="the guest and the child it forked")
            guests.pause_all()
            await wait_until(lambda: all(_freezer_state(p) == "FROZEN" for p in processes), what="both frozen")
            used = cpu_of(processes)
            await trio.sleep(1.0)
            assert cpu_of(processes) == used  # neither the guest nor its forked child ran while paused
            assert not outcomes
            guests.resume_all()
            assert all(_freezer_state(p) == "THAWED" for p in processes)
            await wait_until(lambda: outcomes, timeout=120, what="the unit to finish")
    finally:
        guests.close()
    assert isinstance(outcomes[0], Completed), outcomes[0]
    assert outcomes[0].value() == counter_result(write_plugin(tmp_path, "counter", COUNTER), data)
    assert guest_processes() == []  # the forked child was killed with its guest


def _freezer_state(process: psutil.Process) -> str:
    """What the kernel says of the freezer cgroup `process` is in, read as an administrator would."""
    line = next(line for line in Path(f"/proc/{process.pid}/cgroup").read_text().splitlines() if ":freezer:" in line)
    return (current_mounts().v1_roots["freezer"] / line.partition(":freezer:/")[2] / "freezer.state").read_text().strip()


async def test_a_guest_over_its_declared_memory_is_killed_by_its_cgroup_and_may_be_retried(tmp_path):
    require_containment()
    events = Recorder()
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(step_timeout=600), on_event=events)
    task = make_task(write_plugin(tmp_path, "greedy", GREEDY), {"mode": "creeping"}, memory=16 * MIB)
    try:
        outcome = await guests.run(task)
    finally:
        guests.close()
    assert isinstance(outcome, Failed)
    assert outcome.reason.startswith("memory: the guest was killed by its memory cgroup"), outcome.reason
    assert "16 MiB" in outcome.reason
    assert outcome.retryable  # the master retries it per guests.max_retries
    assert any(m.startswith("memory: the guest was killed") for m in events.messages("failed"))


async def test_a_guest_started_without_the_spare_is_put_in_its_cgroup_from_a_worker_thread(tmp_path, monkeypatch):
    """Making a cgroup's folders and moving the pid in took 0.5-16 ms: the node's event loop, with every other
    guest's result behind it, does not wait for that (the spare's cgroup is made the same way, ahead of need)."""
    require_containment()
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(), on_event=Recorder())
    from_loop_thread = []
    cgroup_for = guests.containment.cgroup_for

    def recorded(pid, task):
        from_loop_thread.append(threading.current_thread() is threading.main_thread())
        return cgroup_for(pid, task)

    monkeypatch.setattr(guests.containment, "cgroup_for", recorded)
    path = write_plugin(tmp_path, "counter", COUNTER)
    data = {"n": 3, "spin": 10}
    try:
        outcome = await guests.run(make_task(path, data))   # no keep_warm: no spare, a fresh guest process
    finally:
        guests.close()
    assert isinstance(outcome, Completed) and outcome.value() == counter_result(path, data)
    assert from_loop_thread == [False]


def test_cgroups_left_by_a_node_killed_with_minus_9_are_removed_by_the_next(tmp_path):
    require_containment()
    script = textwrap.dedent(
        """
        import subprocess, sys, time
        from frost_core.guest.cgroups import open_guest_cgroups
        cgroups = open_guest_cgroups()
        guest = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
        cgroups.guest("guest-1", memory_bytes=64 << 20, pids_max=16).add(guest.pid)
        print(guest.pid, *cgroups.parents.values(), flush=True)
        time.sleep(120)
        """
    )
    node = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        orphan, *folders = node.stdout.readline().split()
    finally:
        node.send_signal(signal.SIGKILL)
        node.wait()
        node.stdout.close()
    assert folders and all(os.path.isdir(folder) for folder in folders)
    assert psutil.pid_exists(int(orphan))
    cgroups = open_guest_cgroups()  # the next node on this machine
    try:
        assert not any(os.path.exists(folder) for folder in folders)
        deadline = time.monotonic() + 10
        while psutil.pid_exists(int(orphan)) and psutil.Process(int(orphan)).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the orphaned guest still runs"
            time.sleep(0.05)
    finally:
        cgroups.close()


def test_the_cpu_cap_is_the_guests_parents_cfs_quota():
    require_containment()
    cgroups = open_guest_cgroups(cpu_cap_percent=25)
    try:
        quota = cgroups.parents["cpu"] / "cpu.cfs_quota_us"
        assert quota.read_text().strip() == "25000"  # 25 ms of every 100 ms: a quarter of one core
        cgroups.set_cpu_cap(None)
        assert quota.read_text().strip() == "-1"
        assert (cgroups.parents["cpu"] / "cpu.shares").read_text().strip() == "15"  # a nice-19 weight
    finally:
        cgroups.close()
    assert not cgroups.parents["cpu"].exists()


def test_status_names_each_isolation_layer_and_why_one_is_missing(single_node):
    require_containment()
    node = single_node()
    lines = node.call("status")["hosting"]["isolation"]
    layers = dict(line.split(": ", 1) for line in lines)
    assert layers["cgroups"].startswith("v1 (cpu, cpuacct, memory, pids, freezer)")
    assert layers["files"].startswith("Landlock ABI ")
    assert layers["network"] == "own namespace, no interfaces up"
    # A root node's guests run as frost-guest or nobody, though the interpreter is under /root, closed to them.
    account = guest_user()
    assert layers["user"] == f"uid {account.pw_uid} ({account.pw_name})"
    assert "user:" not in layers.get("warning", "")


async def test_strict_isolation_refuses_a_guest_when_a_layer_is_missing(tmp_path):
    require_containment()
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(isolation="strict"), on_event=Recorder())
    try:
        missing = guests.isolation().missing
        outcome = await guests.run(make_task(write_plugin(tmp_path, "counter", COUNTER), {"n": 3}))
    finally:
        guests.close()
    if missing:
        assert isinstance(outcome, Failed) and outcome.reason.startswith("isolation: strict isolation")
        assert outcome.retryable  # another machine may hold every layer
        assert guest_processes() == []
    else:
        assert isinstance(outcome, Completed)


MEMORY_HOG = HEADER + textwrap.dedent(
    """
    class Hog(Plugin):
        name = "hog"
        version = "1"

        def split(self, params):
            return [WorkUnit(0, {}, 16 << 20, 1.0)]  # declares 16 MiB

        def start(self, unit):
            return {}

        def step(self, state):
            global HOARD
            HOARD = globals().get("HOARD", [])
            HOARD.append(bytearray(4 << 20))
            HOARD[-1][::4096] = b"x" * len(HOARD[-1][::4096])
            return state

        def progress(self, state):
            return 0.0

        def combine(self, params, results):
            return Output(b"", "text/plain", "out.txt")

    plugin = Hog()
    """
)


def test_a_node_retries_a_unit_its_memory_cgroup_killed_per_max_retries_then_fails_it(single_node, tmp_path):
    require_containment()
    # Not about the owner: this machine's other work must not count as a busy owner here.
    node = single_node('\n[owner]\npolicy = "always"\nmemory_pressure = 100\n\n[guests]\nmax_retries = 1\n')
    node.call("add-plugin", path=str(write_plugin(tmp_path, "hog", MEMORY_HOG)))
    assignment_id = node.cli("submit", "hog").stdout.split()[1].rstrip(":")
    wait_for(lambda: node.call("assignment", assignment=assignment_id)["state"] == "failed", timeout=120,
             what="the assignment to fail")
    [unit] = node.call("assignment", assignment=assignment_id)["units"]
    assert unit["failures"] == 2  # two runs killed: requeued once (guests.max_retries = 1), then failed for good
    assert "killed by its memory cgroup" in unit["error"], unit["error"]
    retried = [e["message"] for e in node.call("events") if "retrying" in e["message"]]
    assert len(retried) == 1 and "killed by its memory cgroup" in retried[0]
