"""Run trio code (the node) as a guest run on the asyncio loop that Textual owns.

Both share one thread, so the UI may call trio's non-blocking APIs directly (`cancel()`), and
must never use `trio.from_thread.*`, which deadlocks in guest mode.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import outcome
import trio


class TrioHost:
    """One trio guest run: start it, cancel it, await its end, learn how it ended."""

    def __init__(self) -> None:
        self._cancel_scope = trio.CancelScope()
        self._done: asyncio.Future[outcome.Outcome] | None = None
        self._token: trio.lowlevel.TrioToken | None = None

    @property
    def running(self) -> bool:
        return self._done is not None and not self._done.done()

    def start(self, async_fn: Callable[[], Awaitable[object]], *, on_done: Callable[[outcome.Outcome], None]) -> None:
        """Start `async_fn` under trio; `on_done` gets its outcome on the asyncio loop.

        Cancelling through `cancel()` ends the run with a plain `Value(None)`, so `on_done`
        sees an error only when the trio code failed on its own.
        """
        loop = asyncio.get_running_loop()
        done: asyncio.Future[outcome.Outcome] = loop.create_future()
        self._done = done

        async def main() -> None:
            self._token = trio.lowlevel.current_trio_token()
            with self._cancel_scope:
                await async_fn()

        def finish(result: outcome.Outcome) -> None:
            if not done.done():
                done.set_result(result)
            on_done(result)

        trio.lowlevel.start_guest_run(
            main,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            done_callback=finish,
            host_uses_signal_set_wakeup_fd=False,
            restrict_keyboard_interrupt_to_checkpoints=True,
        )

    def run_soon(self, async_fn: Callable[[], Awaitable[object]]) -> bool:
        """Run `async_fn` under trio beside the code `start` runs, until it returns or the run ends (which cancels
        it); False if there is no run to do it in. What it raises ends the whole run: it must catch what it can
        expect."""
        if self._token is None or not self.running:
            return False
        try:
            self._token.run_sync_soon(trio.lowlevel.spawn_system_task, async_fn)
        except trio.RunFinishedError:
            return False
        return True

    def cancel(self) -> None:
        """Ask the trio code to stop; safe to call from UI code on the same thread, any number of times."""
        self._cancel_scope.cancel()

    async def wait(self) -> outcome.Outcome | None:
        """Wait for the trio run to end (returns at once if it never started)."""
        if self._done is None:
            return None
        return await asyncio.shield(self._done)

    async def stop(self) -> outcome.Outcome | None:
        """Cancel and await the end: skipping the await would abandon trio silently."""
        self.cancel()
        return await self.wait()
