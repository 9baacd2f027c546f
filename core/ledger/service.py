"""The ledger inside a running node: records runs as they end, swaps signed summaries, keeps a view for the UI.

Runs that end together are written together in a thread (one commit for a burst of results);
everything that reads the whole ledger (the view, this node's summary) runs in a thread as well,
so neither the UI nor the master's results wait for the disk.
"""

from __future__ import annotations

import logging
import math
import time
from functools import partial
from collections.abc import Callable

import trio

from frost_core.api.errors import StorageError
from frost_core.api.ledger import LedgerView
from frost_core.events import EventLog
from frost_core.ledger.book import Ledger, NewRun, given_run, peer_speeds, received_run
from frost_core.ledger.exchange import EXCHANGE_INTERVAL, install_ledger, serve_exchanges
from frost_core.ledger.signing import NodeKey
from frost_core.ledger.stats import balances, ledger_view
from frost_core.ledger.summary import SignedSummary, sign_summary
from frost_core.policies.fair_share import decayed
from frost_core.storage.disk_watch import RETRY_AFTER
from frost_core.wire.channel import Address
from frost_core.wire.transport import NetworkTransport

log = logging.getLogger("frost.ledger")

VIEW_WINDOW = 30 * 86400.0
"""The UI's per-peer and per-day figures cover the last 30 days (`frost-tui stats --since` asks for others)."""
VIEW_REFRESH = 2.0
"""At most this often the UI's view is rebuilt after a change."""
WRITE_GATHER = 0.1
"""At most one write of the ledger per this many seconds: a sweep of tiny units ends hundreds of runs a
second, and a transaction (a thread hop and an fsync) per run cost its master ~0.2 ms per unit. A run that
ends after a quiet spell is written at once, so a node killed after its last guest ended keeps it; in a burst
a crash loses at most this much of the ledger, never a result (the master's store holds those). Readers
write what waits first."""
VIEW_SHARE = 0.02
"""At most this share of the time goes to rebuilding the view: it sums every run of the window, so with
tens of thousands of runs (a 10,000-unit sweep's master) a rebuild every 2 s took a tenth of its CPU. (Summed in
SQLite per peer and hour since 2026-11-27: 200,000 runs 0.5 s, most of it with the interpreter free, against
1.6 s of Python.)"""


def refresh_pause(rebuild_seconds: float) -> float:
    """How long to wait after a rebuild that took `rebuild_seconds` before the next: `VIEW_REFRESH`, or longer
    for a long ledger, so that rebuilding costs a bounded share of the node however many runs it holds."""
    return max(VIEW_REFRESH, rebuild_seconds / VIEW_SHARE)


class LedgerService:
    def __init__(self, ledger: Ledger, key: NodeKey, *, events: EventLog, speed: Callable[[], float],
                 names: Callable[[], dict[str, str]], on_change: Callable[[], None],
                 disk_refused: Callable[[StorageError], None] = lambda error: None) -> None:
        """`disk_refused`: told of each write the disk refused (the runs wait in memory and are written later)."""
        self.ledger = ledger
        self._disk_refused = disk_refused
        self._key = key
        ledger.pin(ledger.node_id, key.public)
        self._events = events
        self._speed = speed
        self._names = names
        self._on_change = on_change
        self._dirty = trio.Event()
        self._unwritten: list[NewRun] = []   # runs ended since the last write
        self._write_refused = False          # the last write was refused by the disk
        self._arrived = trio.Event()
        self._written_at = -math.inf
        self._refused = 0
        self.view = LedgerView()
        self._balances: dict[str, float] = {}
        self._usage: dict[str, list[tuple[float, float]]] = {}   # submitter -> (when, normalised CPU) given to it
        self._usage_sums: dict[tuple[str, float], tuple[float, float]] = {}   # (submitter, half-life) -> (when, sum)
        self._speeds: dict[str, float] = {}   # node -> the speed its latest verified summary states

    # -- what the host and the master tell it -----------------------------------------------------

    def gave(self, *, master: str, submitter: str, task_id: str, epoch: int, cpu_seconds: float,
             at: float | None = None) -> None:
        """A guest run here ended (at `at`, now if None): `cpu_seconds` of this machine went to `master`'s unit."""
        self._unwritten.append(given_run(master=master, submitter=submitter, task_id=task_id, epoch=epoch,
                                         cpu_seconds=cpu_seconds, speed=self._speed(),
                                         at=time.time() if at is None else at))
        self._arrived.set()

    def received(self, *, host: str, submitter: str, task_id: str, epoch: int, cpu_seconds: float,
                 ended_at: float | None = None) -> None:
        """A run of one of this master's units on `host` used `cpu_seconds`: its result arrived (`ended_at` None),
        or its host reported it ended at `ended_at` without one (evicted, moved, failed, stopped)."""
        speed = self._speed() if host == self.ledger.node_id else 1.0   # a peer's: from its summary, on reading
        self._unwritten.append(received_run(host=host, submitter=submitter, task_id=task_id, epoch=epoch,
                                            cpu_seconds=cpu_seconds, speed=speed, at=time.time(), ended_at=ended_at))
        self._arrived.set()

    async def write_unwritten(self) -> None:
        """Write the runs recorded since the last write, together, in a thread: at hundreds of results a
        second, a commit per run would put an fsync per result on the node's loop. Runs the disk refused
        stay in memory, in order, and `_write_as_they_come` tries them again `RETRY_AFTER` seconds on."""
        batch, self._unwritten = self._unwritten, []
        try:
            written = await trio.to_thread.run_sync(self.ledger.record, batch)
        except trio.Cancelled:
            self._unwritten[:0] = batch   # shutting down: close() writes them (a second write of any is ignored)
            raise
        except StorageError as error:
            self._unwritten[:0] = batch
            self._disk_refused(error)
            self._write_refused = True
            self._arrived.set()
            return
        self._write_refused = False
        if written:
            self._dirty.set()

    async def _write_as_they_come(self) -> None:
        while True:
            await self._arrived.wait()
            # At once after a quiet spell; a refused write waits for the disk.
            await trio.sleep_until(self._written_at + (RETRY_AFTER if self._write_refused else WRITE_GATHER))
            self._arrived = trio.Event()
            self._written_at = trio.current_time()
            await self.write_unwritten()

    def close(self) -> None:
        """Write what still waits, then close the file."""
        try:
            self.ledger.record(self._unwritten)
        except StorageError as error:
            log.warning("%d runs ended since the ledger was last written are lost: %s", len(self._unwritten),
                        error.message)
        self._unwritten = []
        self.ledger.close()

    # -- what fair share and reciprocity read ---------------------------------------------------

    def decayed_usage(self, submitter: str, now: float, half_life: float) -> float:
        """`Ledger.decayed_usage` as of the last refresh (`refresh_pause` behind a change at most), from memory:
        cheap enough for every placement decision, and it never touches the disk on the node's loop. The sum is
        taken once per refresh and decayed as one from then on (2^(−Δ/h) factors out of every term): a sum per
        call cost one term per run given, and a 10,000-unit sweep's master a sixth of its loop on its offers."""
        key = (submitter, half_life)
        if key not in self._usage_sums:
            self._usage_sums[key] = (now, sum(decayed(cpu, now - at, half_life)
                                              for at, cpu in self._usage.get(submitter, ())))
        taken_at, total = self._usage_sums[key]
        return decayed(total, now - taken_at, half_life)

    def speed_of(self, node_id: str) -> float:
        """A node's calibrated speed (its CPU-second in speed units) as its latest signed summary states it;
        this machine's own for itself, and for a node whose summary has not come yet (an office's machines
        are more alike than a speed of 1 would make them)."""
        if node_id == self.ledger.node_id:
            return self._speed()
        return self._speeds.get(node_id) or self._speed()

    def balance_of(self, node_id: str) -> float:
        """A node's given minus received (normalised CPU-seconds, all time), as of the last view."""
        return self._balances.get(node_id, 0.0)

    # -- views ----------------------------------------------------------------------------------

    async def view_since(self, since: float) -> LedgerView:
        """The view from `since` on (`frost-tui stats --since`)."""
        view, _, _, _ = await self._rebuilt(since)
        return view

    async def signed_summaries(self) -> tuple[SignedSummary, ...]:
        """This node's own summary, freshly signed, then the peers' it holds."""
        await self.write_unwritten()
        speed = self._speed()
        return await trio.to_thread.run_sync(self._sign_all, speed)

    def _sign_all(self, speed: float) -> tuple[SignedSummary, ...]:
        own = sign_summary(self._key, self.ledger.summary(time.time(), speed))
        return (own, *self.ledger.held())

    # -- on the network -------------------------------------------------------------------------

    def install(self, transport: NetworkTransport) -> None:
        install_ledger(transport, self.ledger, self.signed_summaries, self._summary_refused)

    async def serve(self, transport: NetworkTransport, peers: Callable[[], list[Address]], *,
                    interval: float = EXCHANGE_INTERVAL,
                    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Swap summaries with peers and keep the UI's view fresh, until cancelled."""
        async with trio.open_nursery() as nursery:
            await nursery.start(partial(serve_exchanges, transport, self.ledger, peers, self.signed_summaries,
                                        self._summary_refused, self._dirty.set, interval=interval))
            nursery.start_soon(self._write_as_they_come)
            self._dirty.set()
            task_status.started()
            while True:
                await self._dirty.wait()
                self._dirty = trio.Event()
                began = time.perf_counter()
                await self.refresh()
                await trio.sleep(refresh_pause(time.perf_counter() - began))

    async def refresh(self) -> None:
        self.view, self._balances, self._usage, self._speeds = await self._rebuilt(time.time() - VIEW_WINDOW)
        self._usage_sums = {}
        self._on_change()

    async def _rebuilt(self, since: float) -> tuple[LedgerView, dict[str, float], dict[str, list[tuple[float, float]]],
                                                    dict[str, float]]:
        await self.write_unwritten()
        names, speed, refused = self._names(), self._speed(), self._refused   # read on the loop, not in the thread
        return await trio.to_thread.run_sync(self._rebuild, since, names, speed, refused)

    def _rebuild(self, since: float, names: dict[str, str], speed: float, refused: int,
                 ) -> tuple[LedgerView, dict[str, float], dict[str, list[tuple[float, float]]], dict[str, float]]:
        now = time.time()
        reading = self.ledger.read(since=since, now=now, speed=speed)
        view = ledger_view(reading.hours, reading.summaries, reading.own, now=now, since=since,
                           name_of=lambda node_id: names.get(node_id, node_id[:8]), refused=refused)
        return view, balances(reading.summaries, reading.own), reading.usage, peer_speeds(reading.summaries)

    def _summary_refused(self, source: str, reason: str) -> None:
        self._refused += 1
        self._events.add("ledger", f"a ledger summary relayed by {source} was refused: {reason}", severity="warning",
                         title="Forged ledger summary")
        self._dirty.set()
