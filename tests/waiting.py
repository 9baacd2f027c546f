"""The one way tests wait: poll a condition until it holds, and fail naming what never happened.

`wait_for` blocks (real processes: there is no clock to fake); `wait_until` is its trio twin,
which takes mock seconds under `MockClock` and real ones otherwise; `wait_in_app` lets a Textual
app under Pilot run (on asyncio) until the condition holds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

import trio

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], *, timeout: float, what: str, interval: float = 0.2,
             show: Callable[[], object] | None = None) -> T:
    """Poll until `predicate()` is truthy and return it; after `timeout` s fail with its last value (and what
    `show()` returns then: the state the predicate judged, when it returns only False)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    shown = "" if show is None else f"; then: {show()!r}"
    raise AssertionError(f"timed out after {timeout} s waiting for {what}; last value: {last!r}{shown}")


async def wait_until(predicate: Callable[[], T], *, timeout: float = 60.0, what: str = "the condition",
                     interval: float = 0.01) -> T:
    """`wait_for` inside trio: a starved idle-priority guest may take a while on a busy box."""
    start = trio.current_time()
    while not (value := predicate()):
        if trio.current_time() - start >= timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; last value: {value!r}")
        await trio.sleep(interval)
    return value


async def wait_in_app(pilot: Any, condition: Callable[[], object], *, timeout: float = 10.0) -> None:
    """Let the app under `pilot` run until `condition()` holds (a real node answers in its own time)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not reached within {timeout} s")
        await pilot.pause(0.05)
