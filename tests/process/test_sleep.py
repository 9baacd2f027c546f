"""The machine going to sleep: logind's delay inhibitor is held, guests go first, then it is released."""

import trio

from frost_core.node.sleep import watch_sleep
from tests.process.dbus import MANAGER_PATH, Inhibitors, logind_service
from tests.waiting import wait_until

MANAGER = "org.freedesktop.login1.Manager"


def stand_in_logind(system, inhibitors):
    return logind_service(system.address, lambda: None,
                          extra={(MANAGER_PATH, MANAGER, "Inhibit"): inhibitors.inhibit})


async def test_the_inhibitor_is_released_only_after_the_guests_are_handed_on_and_taken_again_on_waking(
        buses, started):
    _, system = buses
    inhibitors = Inhibitors()
    logind = stand_in_logind(system, inhibitors)
    started(logind)
    lines, calls = [], []

    async def before_sleep(seconds):
        await trio.sleep(0.2)               # handing guests on takes a moment: logind must wait for it
        calls.append(("sleep", seconds, inhibitors.held()))

    async def after_wake():
        calls.append(("wake", inhibitors.held()))

    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(watch_sleep, before_sleep, after_wake, lines.append)
            assert inhibitors.held() == 1
            assert inhibitors.taken[0][0][0::3] == ("sleep", "delay")
            assert lines == ["sleep watched: logind waits up to 4.5 s for the guests to be handed on"]
            logind.emit(MANAGER_PATH, MANAGER, "PrepareForSleep", "b", (True,))
            await wait_until(lambda: calls and inhibitors.held() == 0, timeout=10, what="the inhibitor released")
            assert calls == [("sleep", 4.5, 1)], "released before the guests were handed on"
            logind.emit(MANAGER_PATH, MANAGER, "PrepareForSleep", "b", (False,))
            await wait_until(lambda: inhibitors.held() == 1, timeout=10, what="a new inhibitor after waking")
            assert calls[1] == ("wake", 0)
            nursery.cancel_scope.cancel()
        assert inhibitors.held() == 0, "the inhibitor outlived the node"
    finally:
        inhibitors.close()


async def test_without_logind_sleep_is_not_watched_and_nothing_breaks(buses):
    lines = []

    async def never(*args):
        raise AssertionError("called without logind")

    with trio.fail_after(10):
        await watch_sleep(never, never, lines.append)
    assert lines == ["sleep not watched: no logind on a system bus (org.freedesktop.DBus.Error.ServiceUnknown)"]
