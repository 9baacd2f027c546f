"""The master's copy of each gang's last global checkpoint on disk: a gang outlives its master's crash.

One folder per gang in a CheckpointStore (task id = the gang's assignment id): a file holds the
p members' MemberCheckpoint bytes of one barrier as a CBOR list, its seq the superstep they
resume at. It is written as unit checkpoints are (into the slot not holding the newest, or a
temp file renamed for a big one; SHA-256 checked on read), so a kill at any moment leaves either
the previous complete global checkpoint or the new one, and the newest that reads whole is
resumed from. Writes and reads run in a worker thread one at a time; a write older than the
gang's newest, or for a gang that ended, is dropped.
"""

from __future__ import annotations

from pathlib import Path

import trio

from frost_core.api.errors import CheckpointError, PluginError, ProtocolError
from frost_core.cluster.messages import GangSpec
from frost_core.master.gang import GlobalCheckpoint
from frost_core.plugin.gang import MemberCheckpoint
from frost_core.storage.checkpoints import CheckpointStore, read_record
from frost_core.wire.codec import decode_strict, encode


class GangCheckpoints:
    """The last complete global checkpoint of each gang this node is master of, under `root`."""

    def __init__(self, root: Path) -> None:
        self.store = CheckpointStore(root)
        self._lock = trio.Lock()
        self._written: dict[str, int] = {}     # gang -> the superstep of its file, written by this process
        self._ended: set[str] = set()

    async def save(self, spec: GangSpec, checkpoint: GlobalCheckpoint) -> bool:
        """Make `checkpoint` the gang's file, replacing the one before; False if it is older than the file or
        the gang ended. CheckpointError if it could not be written (the previous one is kept)."""
        gang_id = spec.assignment_id
        async with self._lock:
            if gang_id in self._ended or checkpoint.superstep <= self._written.get(gang_id, -1):
                return False
            await trio.to_thread.run_sync(lambda: self.store.commit(
                task_id=gang_id, plugin_name=spec.plugin_name, plugin_version=spec.plugin_version,
                plugin_hash=spec.plugin_hash, unit_index=0, epoch=0, seq=checkpoint.superstep,
                taken_at=checkpoint.at, state=encode(list(checkpoint.data))))
            self._written[gang_id] = checkpoint.superstep
            return True

    async def discard(self, gang_id: str) -> None:
        """The gang ended (done, failed or cancelled): remove its file; a save still on its way is dropped."""
        async with self._lock:
            self._ended.add(gang_id)
            self._written.pop(gang_id, None)
            await trio.to_thread.run_sync(self.store.discard, gang_id)

    async def load(self, gang_id: str, plugin_hash: str, size: int) -> tuple[GlobalCheckpoint | None, list[CheckpointError]]:
        """The gang's newest global checkpoint that reads whole (None if there is none) and an error naming
        the gang and the file for each unreadable one (corrupt, truncated, another plugin's or gang size's).
        Never beside a save: a slot is overwritten in place, and read in the middle it would look corrupt."""
        async with self._lock:
            return await trio.to_thread.run_sync(self._load, gang_id, plugin_hash, size)

    def _load(self, gang_id: str, plugin_hash: str, size: int) -> tuple[GlobalCheckpoint | None, list[CheckpointError]]:
        errors = []
        for path in self.store.files(gang_id):
            try:
                return _read(path, gang_id, plugin_hash, size), errors
            except (CheckpointError, OSError) as error:
                reason = error.message if isinstance(error, CheckpointError) else str(error.strerror or error)
                errors.append(CheckpointError(f"the global checkpoint of gang {gang_id} in {path} is unreadable: {reason}",
                                              title="Unreadable gang checkpoint"))
        return None, errors


def _read(path: Path, gang_id: str, plugin_hash: str, size: int) -> GlobalCheckpoint:
    """One gang checkpoint file, verified and decoded; CheckpointError says what is wrong with it."""
    record = read_record(path)
    if record.task_id != gang_id or record.plugin_hash != plugin_hash:
        raise CheckpointError(f"it belongs to gang {record.task_id} of plugin {record.plugin_hash[:12]}")
    try:
        data = decode_strict(record.state, max_depth=2)
    except ProtocolError as error:
        raise CheckpointError(f"its members' checkpoints are not valid CBOR: {error.message}") from error
    if not isinstance(data, list) or len(data) != size or not all(isinstance(part, bytes) for part in data):
        raise CheckpointError(f"it does not hold {size} members' checkpoints")
    for rank, part in enumerate(data):
        try:
            member = MemberCheckpoint.from_bytes(part, size)
        except PluginError as error:
            raise CheckpointError(f"rank {rank}'s part: {error.message}") from error
        if (member.rank, member.superstep) != (rank, record.seq):
            raise CheckpointError(f"rank {rank}'s part holds rank {member.rank} before superstep {member.superstep}, "
                                  f"not before {record.seq}")
    return GlobalCheckpoint(record.seq, record.taken_at, tuple(data))
