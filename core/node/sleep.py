"""The machine going to sleep: logind's delay inhibitor buys the node time to hand its guests on and say goodbye.

logind announces a suspend with `PrepareForSleep(true)` on the system bus and waits for every
"delay" inhibitor to be released, at most `InhibitDelayMaxUSec` (5 s by default); waking, it
sends `PrepareForSleep(false)`. The node holds one such inhibitor while it is awake: on the
signal it checkpoints and sends on its guests and tells its peers it leaves, then lets go;
on waking it rejoins and takes the inhibitor again. Without logind nothing is watched, and a
laptop that sleeps costs its guests the work since their last checkpoint (its peers restart
them from there once they count it dead); `status` says which of the two holds. A system bus
that goes away later (dbus-daemon or dbus-broker restarted or crashed) is waited out: the
watch says so once and connects again every few seconds until logind answers. Lost between the
two signals, it takes the node for awake (it runs: the machine is up again, or about to go down
with its guests already handed on) rather than wait for a `PrepareForSleep(false)` that a new
connection never hears; a node left "going to sleep" took no guest until it restarted.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio
from jeepney import DBusAddress, DBusErrorResponse, MatchRule, Properties, new_method_call
from jeepney.bus_messages import message_bus
from jeepney.io.trio import open_dbus_connection
from jeepney.wrappers import unwrap_msg

from frost_core.measure.buses import UNREACHABLE, why_unreachable

log = logging.getLogger("frost.sleep")

LOGIND = DBusAddress("/org/freedesktop/login1", bus_name="org.freedesktop.login1",
                     interface="org.freedesktop.login1.Manager")
# The bus delivers only logind's own signal; the router's filter sees its unique name as the
# sender, so it matches on the rest.
PREPARE_FOR_SLEEP = MatchRule(type="signal", path=LOGIND.object_path, interface=LOGIND.interface,
                              member="PrepareForSleep")
FROM_LOGIND = MatchRule(type="signal", sender=LOGIND.bus_name, path=LOGIND.object_path, interface=LOGIND.interface,
                        member="PrepareForSleep")
CONNECT_TIMEOUT = 2.0       # seconds to reach the system bus and logind before giving up on watching sleep
DEFAULT_DELAY = 5.0         # logind's default InhibitDelayMaxSec, when it does not say
RELEASE_MARGIN = 0.5        # seconds kept back to let go of the inhibitor before logind stops waiting
RETRY_PAUSE = 5.0           # seconds between tries to reach logind again once the system bus went away


@dataclass(frozen=True)
class SleepWatch:
    """What the watch can do now: `line` for `status`, `brief` for a screen's side panel (the bus's reason made
    the Machine tab's Sleep row five lines long on a machine without logind)."""

    line: str
    brief: str


NOT_YET = SleepWatch("sleep not watched yet", "not watched yet")
ASLEEP = SleepWatch("asleep: the inhibitor is released", "asleep")


async def _inhibit(router) -> object:
    """A delay inhibitor for sleep: a file descriptor whose closing releases it."""
    reply = await router.send_and_get_reply(new_method_call(
        LOGIND, "Inhibit", "ssss",
        ("sleep", "frost-tui", "checkpointing guests and leaving the cluster before sleep", "delay")))
    (descriptor,) = unwrap_msg(reply)
    return descriptor


async def _delay_budget(router) -> float:
    """Seconds logind waits for a delay inhibitor, less a margin to release it in time."""
    try:
        reply = await router.send_and_get_reply(Properties(LOGIND).get("InhibitDelayMaxUSec"))
        ((_, microseconds),) = unwrap_msg(reply)
        delay = microseconds / 1e6
    except DBusErrorResponse:
        delay = DEFAULT_DELAY
    return max(delay - RELEASE_MARGIN, RELEASE_MARGIN)


async def watch_sleep(before_sleep: Callable[[float], Awaitable[None]], after_wake: Callable[[], Awaitable[None]],
                      report: Callable[[SleepWatch], None], *, retry_pause: float = RETRY_PAUSE,
                      task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Hold a sleep inhibitor; call `before_sleep(seconds it may take)` before a suspend, then release
    it; call `after_wake()` on waking and take it again. `report` gets each new state; neither
    a missing bus nor one that goes away stops the node. No logind at start ends the watch (a machine
    without one stays without); a bus lost later is reported once and tried again every
    `retry_pause` seconds, as a restarted dbus-daemon comes back at the same address."""
    lost, watched = await _watch_until_lost(before_sleep, after_wake, report, task_status)
    if not watched:
        report(SleepWatch(f"sleep not watched: no logind on a system bus ({why_unreachable(lost)})",
                          "not watched: no logind (frost-tui status says why)"))
        task_status.started()
        return
    while True:
        report(SleepWatch(f"sleep no longer watched: no logind on a system bus ({why_unreachable(lost)}); "
                          f"trying again every {retry_pause:g} s",
                          "no longer watched: logind went away (frost-tui status says why)"))
        watched = False
        while not watched:      # a try that fails too is no news to the owner
            await trio.sleep(retry_pause)
            lost, watched = await _watch_until_lost(before_sleep, after_wake, report, trio.TASK_STATUS_IGNORED)


async def _watch_until_lost(before_sleep: Callable[[float], Awaitable[None]], after_wake: Callable[[], Awaitable[None]],
                            report: Callable[[SleepWatch], None], task_status) -> tuple[BaseException, bool]:
    """One connection to logind, followed until the bus or logind fails it: the error that ended it,
    and whether it got as far as holding an inhibitor (then `task_status` was told it started)."""
    watched = asleep = False
    lost: BaseException = EOFError("logind's signals ended")   # (the router closed its filters without an error)
    try:
        with trio.fail_after(CONNECT_TIMEOUT):
            connection = await open_dbus_connection("SYSTEM", enable_fds=True)
        async with connection, connection.router() as router:
            # Not `async with`: the router closes its filters' channels when it stops, and a filter
            # leaving meanwhile breaks that loop (jeepney 0.9 iterates the live dict).
            signals = router.filter(PREPARE_FOR_SLEEP, bufsize=4).receive_channel
            with trio.fail_after(CONNECT_TIMEOUT):
                unwrap_msg(await router.send_and_get_reply(message_bus.AddMatch(FROM_LOGIND)))
                budget = await _delay_budget(router)
                inhibitor = await _inhibit(router)
            watching = SleepWatch(f"sleep watched: logind waits up to {budget:.1f} s for the guests to be handed on",
                                  f"watched: {budget:.1f} s to hand the guests on")
            report(watching)
            task_status.started()
            watched = True
            try:
                async for signal in signals:
                    (going,) = signal.body
                    if going and inhibitor is not None:
                        with trio.move_on_after(budget):
                            await before_sleep(budget)
                        inhibitor.close()
                        inhibitor = None
                        asleep = True
                        report(ASLEEP)
                    elif not going:
                        asleep = False
                        await after_wake()
                        with trio.fail_after(CONNECT_TIMEOUT):
                            inhibitor = await _inhibit(router)
                        report(watching)
            finally:
                if inhibitor is not None:
                    inhibitor.close()
    except* UNREACHABLE as group:     # the router's receiver runs in a nursery: its errors come grouped
        lost = group.exceptions[0]
    log.info("sleep watch ended: %r", lost)
    if asleep:
        log.info("the bus went away while the machine slept: taken for awake")
        await after_wake()
    return lost, watched
