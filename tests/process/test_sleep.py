"""The machine going to sleep: logind's delay inhibitor is held, guests go first, then it is released."""

from functools import partial

import pytest
import trio

from frost_core.wire.security import ClusterKey

from frost_core.node.sleep import watch_sleep
from tests.nodes import start_node
from tests.process.dbus import MANAGER_PATH, Inhibitors, PrivateBus, logind_service
from tests.waiting import wait_for, wait_until

MANAGER = "org.freedesktop.login1.Manager"


def stand_in_logind(system, inhibitors):
    return logind_service(system.address, lambda: None,
                          extra={(MANAGER_PATH, MANAGER, "Inhibit"): inhibitors.inhibit})


def logind_started(system, started):
    """A stand-in logind on `system`, stopped after the test: the inhibitors it hands out, and the service."""
    inhibitors = Inhibitors()
    logind = stand_in_logind(system, inhibitors)
    started(logind)
    return inhibitors, logind


async def test_the_inhibitor_is_released_only_after_the_guests_are_handed_on_and_taken_again_on_waking(
        buses, started):
    _, system = buses
    inhibitors, logind = logind_started(system, started)
    lines, calls = [], []

    async def before_sleep(seconds):
        await trio.sleep(0.2)               # handing guests on takes a moment: logind must wait for it
        calls.append(("sleep", seconds, inhibitors.held()))

    async def after_wake():
        calls.append(("wake", inhibitors.held()))

    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(watch_sleep, before_sleep, after_wake, lambda watch: lines.append(watch.line))
            assert inhibitors.held() == 1
            assert inhibitors.taken[0][0][0::3] == ("sleep", "delay")
            assert lines == ["sleep watched: logind waits up to 4.5 s for the guests to be handed on"]
            logind.emit(MANAGER_PATH, MANAGER, "PrepareForSleep", "b", (True,))
            await wait_until(lambda: calls and inhibitors.held() == 0, timeout=10, what="the inhibitor released")
            assert calls == [("sleep", 4.5, 1)], "released before the guests were handed on"
            assert lines[-1] == "asleep: the inhibitor is released"
            logind.emit(MANAGER_PATH, MANAGER, "PrepareForSleep", "b", (False,))
            await wait_until(lambda: lines[-1].startswith("sleep watched"), timeout=10, what="a new inhibitor")
            assert inhibitors.held() == 1 and calls[1] == ("wake", 0)
            nursery.cancel_scope.cancel()
        assert inhibitors.held() == 0, "the inhibitor outlived the node"
    finally:
        inhibitors.close()


async def test_without_logind_sleep_is_not_watched_and_nothing_breaks(buses):
    watches = []

    async def never(*args):
        raise AssertionError("called without logind")

    with trio.fail_after(10):
        await watch_sleep(never, never, watches.append)
    (watch,) = watches
    assert watch.line == "sleep not watched: no logind on a system bus (org.freedesktop.DBus.Error.ServiceUnknown)"
    assert watch.brief == "not watched: no logind (frost-tui status says why)"   # the Machine tab's one line


async def test_a_system_bus_that_goes_away_is_told_once_and_sleep_is_watched_again_when_it_is_back(
        buses, started, tmp_path):
    _, system = buses
    inhibitors, logind = logind_started(system, started)
    lines, slept = [], []

    async def before_sleep(seconds):
        slept.append(seconds)

    async def after_wake():
        pass

    try:
        with trio.fail_after(15):
            async with trio.open_nursery() as nursery:
                await nursery.start(partial(watch_sleep, before_sleep, after_wake, lambda watch: lines.append(watch.line),
                                            retry_pause=0.2))
                logind.stop()
                system.close()          # dbus-daemon restarts or crashes under a watching node
                await wait_until(lambda: inhibitors.held() == 0, timeout=5, what="the inhibitor let go")
                await trio.sleep(1)     # about five tries with no bus: the owner hears of it once, not five times
                assert lines[1:] == ["sleep no longer watched: no logind on a system bus "
                                     "(the bus closed the connection); trying again every 0.2 s"]

                restarted = PrivateBus(tmp_path / "buses", "system")   # same socket path: the daemon is back
                try:
                    logind = stand_in_logind(restarted, inhibitors)
                    started(logind)
                    await wait_until(lambda: lines[-1].startswith("sleep watched") and inhibitors.held() == 1,
                                     timeout=5, what="sleep watched again")
                    logind.emit(MANAGER_PATH, MANAGER, "PrepareForSleep", "b", (True,))
                    await wait_until(lambda: slept and inhibitors.held() == 0, timeout=5, what="a suspend handled")
                    logind.stop()       # before its bus goes: its thread must not die on a closed socket
                finally:
                    restarted.close()
                nursery.cancel_scope.cancel()
    finally:
        inhibitors.close()


async def test_a_system_bus_lost_while_the_machine_slept_counts_as_waking(buses, started):
    """The PrepareForSleep(false) a lost bus never brings is not waited for: a node left "going to sleep"
    took no guest until it was restarted."""
    _, system = buses
    inhibitors, logind = logind_started(system, started)
    calls = []

    async def before_sleep(seconds):
        calls.append("sleep")

    async def after_wake():
        calls.append("wake")

    try:
        with trio.fail_after(15):
            async with trio.open_nursery() as nursery:
                await nursery.start(partial(watch_sleep, before_sleep, after_wake, lambda watch: None, retry_pause=0.2))
                logind.emit(MANAGER_PATH, MANAGER, "PrepareForSleep", "b", (True,))
                await wait_until(lambda: calls == ["sleep"] and inhibitors.held() == 0, timeout=5,
                                 what="the inhibitor released for sleep")
                logind.stop()
                system.close()          # the bus goes away before logind could say the machine woke
                await wait_until(lambda: calls == ["sleep", "wake"], timeout=5, what="the node taken for awake")
                nursery.cancel_scope.cancel()
    finally:
        inhibitors.close()


@pytest.fixture
def nodes(tmp_path):
    """Two real nodes on loopback, one cluster key; stopped after the test."""
    key = tmp_path / "cluster.key"
    ClusterKey.generate().save(key)
    running = []

    def start(name, **kwargs):
        running.append(start_node(tmp_path / name, key_file=key, **kwargs))
        return running[-1]

    yield start
    for node in running:
        node.stop()


NO_BUS = {"DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/frost-test-bus", "DBUS_SESSION_BUS_ADDRESS": ""}
# This test is about sleep, not the owner: the test machine's own load must not hold the guests,
# so both nodes lend their CPU as dedicated servers would ("always").
ALWAYS = '\n[owner]\npolicy = "always"\n'
ONE_CPU = ALWAYS + "\n[guests]\ncpus = 1\n\n[cluster]\nreport_interval = 0.5\nbalance_interval = 0\n"


def test_a_sleeping_node_hands_its_guest_on_and_leaves_before_releasing_then_rejoins_on_waking(
        buses, started, nodes):
    _, system = buses
    inhibitors, logind = logind_started(system, started)
    try:
        # The laptop finds logind on its system bus; its peer has no bus (so no inhibitor of its own).
        laptop = nodes("laptop", extra_config=ALWAYS)
        desk = nodes("desk", seeds=(laptop.address,), env=NO_BUS, extra_config=ONE_CPU)
        wait_for(lambda: {p["state"] for p in desk.call("peers")} == {"alive"} and len(desk.call("peers")) == 2,
                 timeout=30, what="both nodes alive")
        assert laptop.call("status")["hosting"]["sleep"].startswith("sleep watched")
        assert desk.call("status")["hosting"]["sleep"].startswith("sleep not watched")
        assert inhibitors.held() == 1
        # The laptop's own unit runs on the laptop: a master places on itself while it takes guests,
        # whatever a loaded test machine leaves for peers.
        reply = laptop.call("submit", plugin="montecarlo-pi", params={"samples": 10**12, "units": 1})
        wait_for(lambda: laptop.call("status")["guests"], timeout=30, what="a guest on the laptop")

        logind.emit(MANAGER_PATH, MANAGER, "PrepareForSleep", "b", (True,))
        wait_for(lambda: inhibitors.held() == 0, timeout=15, what="the laptop to release its inhibitor")
        # By the time logind may suspend: no guest left on the laptop, its unit in the master's hands
        # (queued or running elsewhere) with its progress kept, and the peer told that it left.
        assert not laptop.call("status")["guests"]
        units = laptop.call("assignment", assignment=reply["id"])["units"]
        assert all(u["host"] != laptop.node_id or u["state"] != "running" for u in units)
        wait_for(lambda: {p["name"]: p["state"] for p in desk.call("peers")}.get("laptop") == "left",
                 timeout=5, what="the desk to learn that the laptop left")
        assert any(e["kind"] == "sleep" for e in laptop.call("events"))

        logind.emit(MANAGER_PATH, MANAGER, "PrepareForSleep", "b", (False,))
        wait_for(lambda: {p["name"]: p["state"] for p in desk.call("peers")}.get("laptop") == "alive",
                 timeout=15, what="the laptop to rejoin after waking")
        wait_for(lambda: inhibitors.held() == 1, timeout=10, what="a new inhibitor after waking")
    finally:
        inhibitors.close()
