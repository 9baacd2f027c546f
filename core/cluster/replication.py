"""Checkpoint copies on peers other than the master (optional: `checkpoints.replica_peers`).

The master holds a replica of every unit's checkpoints, but a master can be cut off just when
its hosts checkpoint; copies on k more peers let it restart a unit from a newer state later.
Who holds a unit's copies is decided by rendezvous hashing on the task id over the live nodes
other than the master, so the master and every host agree on the holders without telling each
other, and membership changes move few units.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from pathlib import Path

import trio

from frost_core.storage.checkpoints import CheckpointRecord, CheckpointStore

log = logging.getLogger("frost.replication")

MAX_HELD_TASKS = 256
"""Units whose copies one node holds for others; the oldest go first beyond this."""


def replica_holders(task_id: str, nodes: Iterable[str], master: str, k: int) -> tuple[str, ...]:
    """The k+1 nodes (never the master) ranked highest for this task; a host sends to those other than itself."""
    candidates = sorted(set(nodes) - {master})
    ranked = sorted(candidates, key=lambda node: hashlib.sha256(f"{task_id}\0{node}".encode()).digest(),
                    reverse=True)
    return tuple(ranked[: k + 1]) if k > 0 else ()


class HeldReplicas:
    """Copies this node keeps for other masters (links.KeeperSide)."""

    def __init__(self, root: Path) -> None:
        self.store = CheckpointStore(root)

    async def keep(self, master: str, record: CheckpointRecord) -> None:
        if await trio.to_thread.run_sync(self._keep, record):
            log.debug("holding checkpoint %s of %s for master %s", record.seq, record.task_id, master[:8])

    async def fetch(self, task_id: str, after_seq: int) -> CheckpointRecord | None:
        return await trio.to_thread.run_sync(self._newer_than, task_id, after_seq)

    def drop_all(self) -> None:
        """Discard every copy held (this node left for another cluster: their masters are out of its reach)."""
        for task_id in self.store.list_tasks():
            self.store.discard(task_id)

    def _keep(self, record: CheckpointRecord) -> bool:
        """Keep `record` if it is newer than the copy held; True if kept."""
        held = self.store.latest(record.task_id)
        if held is not None and held.seq >= record.seq:
            return False
        self.store.write(record)
        tasks = self.store.list_tasks()
        if len(tasks) > MAX_HELD_TASKS:
            by_age = sorted(tasks, key=lambda t: (self.store.root / t).stat().st_mtime)
            for task_id in by_age[: len(tasks) - MAX_HELD_TASKS]:
                self.store.discard(task_id)
        return True

    def _newer_than(self, task_id: str, seq: int) -> CheckpointRecord | None:
        held = self.store.latest(task_id)
        return held if held is not None and held.seq > seq else None
