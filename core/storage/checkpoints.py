"""Crash-safe checkpoint files: two slots overwritten in turn, or temp file and rename; verify on read.

One directory per task under the store's root. A file is a small CBOR header followed by the
raw state bytes, so a migration can stream it without decoding the state:

    MAGIC (8 bytes) | header length (4 bytes, big endian) | CBOR header | state bytes

The SHA-256 covers the identity fields and the state, so a flipped bit anywhere is caught
before a guest resumes from it, and the newest checkpoint is the file with the highest header
seq that verifies. A state under SLOTS_BELOW bytes overwrites, in place, whichever of the task's
two slot files does not hold its newest valid checkpoint (one write at offset 0 and an
fdatasync: no rename, no directory fsync); a crash mid-write tears only that slot, whose hash
then fails, and the other is read (as LMDB's two meta pages). Bigger states, and states written
while they arrive (`IncomingCheckpoint`), go to a temp file, fsync, rename to "{seq}.ckpt",
fsync the directory. Everything here is blocking file I/O: the trio side calls it through
`trio.to_thread.run_sync`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import functools
import hashlib
import logging
import os
import queue
import re
import secrets
import struct
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent import futures
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cbor2

from frost_core.api.errors import CheckpointError
from frost_core.wire.codec import encode
from frost_core.wire.pipe import write_pieces

log = logging.getLogger("frost.checkpoints")

MAGIC = b"FROSTCK\x01"
HEADER_CAP = 4096
SUFFIX = ".ckpt"
TEMP_PREFIX = ".tmp-"
PARALLEL_HASH_FROM = 1 << 20
"""States from this size on are hashed in a second thread while they are written, chunk by chunk
handed to the disk as they go."""
WRITE_CHUNK = 8 << 20
"""The piece of a big state written (then handed to the disk) at a time."""
SPLICE_CHUNK = 1 << 20
"""The pipe a handed state is spliced through: the default pipe-max-size, which an unprivileged node may ask for."""
FOLLOW_POLL = 0.0005
"""Seconds between two looks at a memfd the guest is still writing, when the copy has caught up with it;
doubled at each look that finds nothing new, up to FOLLOW_POLL_MAX (a guest the owner paused mid-write
must not keep a node thread waking 2,000 times a second)."""
FOLLOW_POLL_MAX = 0.05
SLOTS_BELOW = 16 << 20
"""States under this size are written in place into a slot (disk use about twice the state, where it is
small); from it on a temp file is renamed into place, as a state written while it arrives always is. The
guest's KEEP_OUTBOX_BYTES: below it a handed state is whole in its memfd before the copy starts. At 10 MB
(bench/checkpoint_throughput.py, 5 alternating runs at load 3) the guest's path kept 0.75 of a raw
durable replace in a slot against 0.55 renamed (medians); an in-place overwrite of blocks already
allocated costs about half a fresh file's."""
SLOT_NAMES = ("slot-0" + SUFFIX, "slot-1" + SUFFIX)
TRIM_OVER = 2
"""A slot longer than this many times what it is rewritten with is cut to size (else the rest stays: unread)."""
_PLACEHOLDER = "0" * 64
_LENGTH = struct.Struct(">I")
_TASK_ID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}$")
IDENTITY: dict[str, type] = {
    "task_id": str,
    "plugin_name": str,
    "plugin_version": str,
    "plugin_hash": str,
    "unit_index": int,
    "epoch": int,
    "seq": int,
    "taken_at": float,
}
"""A checkpoint's identity, declared once: the fields its SHA-256 covers besides the state, in
hashing order, and their types (the file header holds them too)."""
_HEADER_TYPES: dict[str, type] = {**IDENTITY, "state_size": int, "sha256": str}
_HEX_DIGEST = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class CheckpointRecord:
    """One checkpoint: who it belongs to, where it sits in the sequence, and the state bytes."""

    task_id: str
    plugin_name: str
    plugin_version: str
    plugin_hash: str
    unit_index: int
    epoch: int
    seq: int
    taken_at: float
    state: bytes = field(repr=False)
    sha256: str
    verified: bool = field(default=False, compare=False, repr=False, kw_only=True)
    """True once this process has computed `sha256` from `state`. A record that arrived from a peer
    is not: `CheckpointStore.write` checks it while the state goes to disk, where it costs no wait."""
    staged: IncomingCheckpoint | None = field(default=None, compare=False, repr=False, kw_only=True)
    """The state written to a temp file of the store that keeps it while it arrived from a peer
    (`CheckpointStore.incoming`): `CheckpointStore.write` then only syncs, checks and renames it."""

    @classmethod
    def seal(
        cls,
        *,
        task_id: str,
        plugin_name: str,
        plugin_version: str,
        plugin_hash: str,
        unit_index: int,
        epoch: int,
        seq: int,
        taken_at: float,
        state: bytes,
    ) -> CheckpointRecord:
        """Build a record and compute its hash, so a record in hand is always self-consistent."""
        check_task_id(task_id)
        unsealed = cls(task_id, plugin_name, plugin_version, plugin_hash, unit_index, epoch, seq, float(taken_at),
                       state=bytes(state), sha256=_PLACEHOLDER)
        return dataclasses.replace(unsealed, sha256=_digest(unsealed._identity(), unsealed.state), verified=True)

    @property
    def size(self) -> int:
        return len(self.state)

    def loaded(self) -> CheckpointRecord:
        """This record with its state in memory (blocking file I/O for a `StoredCheckpoint`: call it in a thread)."""
        return self

    def verify(self) -> CheckpointRecord:
        """This record, marked verified; CheckpointError unless the hash matches the identity fields and the state."""
        self._check(_digest(self._identity(), self.state))
        return dataclasses.replace(self, verified=True)

    def _check(self, digest: str) -> None:
        if digest != self.sha256:
            raise CheckpointError(
                f"checkpoint {self.seq} of task {self.task_id} fails its SHA-256 check", title="Corrupt checkpoint"
            )

    def _identity(self) -> tuple[Any, ...]:
        """The `IDENTITY` fields' values, in order (taken_at as a float, as the header holds it)."""
        return tuple(float(getattr(self, name)) if kind is float else getattr(self, name)
                     for name, kind in IDENTITY.items())


def identity_prefix(identity: dict[str, Any]) -> bytes:
    """What a checkpoint's SHA-256 hashes before its state: the CBOR of its `IDENTITY` fields, in order.

    A guest that answers through its memfd (`CheckpointStore.commit_handed`) is given it, so it
    hashes its own state and the node never does."""
    return encode([float(identity[name]) if kind is float else identity[name] for name, kind in IDENTITY.items()])


class StoredCheckpoint(CheckpointRecord):
    """A checkpoint whose state stays in its file: read back only where something asks for `state`.

    A guest's checkpoint handed over through its memfd never passes through the node's memory
    (`CheckpointStore.commit_handed`); what needs its bytes later (a replica for the master, a
    move) reads them then. The file is read through a descriptor kept open with the record, so
    a newer checkpoint's install, which removes the name, cannot take the bytes away; the last
    reference's end closes it (in a worker thread: freeing a big unlinked file takes milliseconds).
    Its hash is the guest's own claim, not checked here (`verified` is False): reading the file
    (`read_record`, `CheckpointStore.latest`) checks it, as a peer's store checks a copy it gets.
    """

    def __init__(self, fd: int, offset: int, size: int, **fields: Any) -> None:
        super().__init__(**fields, state=b"")
        object.__setattr__(self, "_place", (fd, offset, size))
        weakref.finalize(self, _workers.submit, functools.partial(_release, fd)).atexit = False

    @property  # type: ignore[override]
    def state(self) -> bytes:
        fd, offset, size = self._place
        parts = []
        while size:
            part = os.pread(fd, size, offset)
            if not part:
                raise CheckpointError(f"checkpoint {self.seq} of task {self.task_id} shrank on disk")
            parts.append(part)
            offset, size = offset + len(part), size - len(part)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    @state.setter
    def state(self, value: bytes) -> None:
        """Only the dataclass's `__init__` sets it (to nothing): the state lies in the file."""

    @property
    def size(self) -> int:
        return self._place[2]

    def loaded(self) -> CheckpointRecord:
        return CheckpointRecord(*self._identity(), state=self.state, sha256=self.sha256)

    def verify(self) -> CheckpointRecord:
        return self.loaded().verify()

    def __eq__(self, other: object) -> bool:
        """Equal to the record of the same checkpoint however it is held (the dataclass's own needs one class)."""
        if not isinstance(other, CheckpointRecord):
            return NotImplemented
        return self.loaded() == other.loaded()

    __hash__ = CheckpointRecord.__hash__


def check_task_id(task_id: str) -> None:
    """Refuse task ids that could escape the store's root or collide with our temp files."""
    if not isinstance(task_id, str) or not _TASK_ID.match(task_id) or ".." in task_id:
        raise CheckpointError(f"invalid task id {task_id!r}: use letters, digits, '.', '_' and '-' only")


def encode_header(record: CheckpointRecord, size: int | None = None) -> bytes:
    """The bytes that precede the state in a checkpoint file (magic, length, CBOR header).

    `size`: the state's, when it has not arrived yet (see `IncomingCheckpoint`).
    """
    state_size = record.size if size is None else size
    header = encode({**dict(zip(IDENTITY, record._identity())), "state_size": state_size, "sha256": record.sha256})
    if len(header) > HEADER_CAP:
        raise CheckpointError(
            f"checkpoint header of task {record.task_id} is {len(header)} bytes; the cap is {HEADER_CAP}"
        )
    return MAGIC + _LENGTH.pack(len(header)) + header


def decode_header(data: bytes) -> dict[str, Any]:
    """Parse and type-check a CBOR header (without magic and length); CheckpointError names the flaw."""
    try:
        fields = cbor2.loads(data, max_depth=2, allow_indefinite=False, allow_duplicate_keys=False)
    except (cbor2.CBORDecodeError, ValueError, TypeError) as error:
        raise CheckpointError(f"checkpoint header is not valid CBOR: {error}") from error
    if not isinstance(fields, dict) or set(fields) != set(_HEADER_TYPES):
        raise CheckpointError("checkpoint header lacks required fields or carries unknown ones")
    for name, kind in _HEADER_TYPES.items():
        value = fields[name]
        if type(value) is not kind or (kind is int and value < 0):
            raise CheckpointError(f"checkpoint header field {name!r} has a bad value {value!r}")
    check_task_id(fields["task_id"])
    return fields


def read_record(path: Path) -> CheckpointRecord:
    """Read and verify one checkpoint file; CheckpointError says what is wrong with it."""
    with open(path, "rb") as file:
        prefix = file.read(len(MAGIC) + _LENGTH.size)
        if len(prefix) < len(MAGIC) + _LENGTH.size or prefix[: len(MAGIC)] != MAGIC:
            raise CheckpointError(f"{path.name} is not a frost checkpoint (bad magic or truncated)")
        (header_len,) = _LENGTH.unpack(prefix[len(MAGIC):])
        if header_len > HEADER_CAP:
            raise CheckpointError(f"{path.name} declares a {header_len}-byte header; the cap is {HEADER_CAP}")
        raw_header = file.read(header_len)
        if len(raw_header) != header_len:
            raise CheckpointError(f"{path.name} is truncated inside its header")
        fields = decode_header(raw_header)
        expected = os.fstat(file.fileno()).st_size - len(prefix) - header_len
        if path.name in SLOT_NAMES and fields["state_size"] < expected:
            expected = fields["state_size"]  # a slot keeps what a longer checkpoint left after its state
        if fields["state_size"] != expected:
            raise CheckpointError(
                f"{path.name} holds {expected} state bytes but its header says {fields['state_size']}"
            )
        state = file.read(expected)  # one buffer, filled in place: no chunks to join
        if len(state) != expected:
            raise CheckpointError(f"{path.name} shrank while it was read")
    record = CheckpointRecord(**{name: fields[name] for name in IDENTITY}, state=state, sha256=fields["sha256"])
    return record.verify()


class CheckpointStore:
    """Durable checkpoints under `root`, one directory per task; safe against a kill at any moment.

    One store writes a root at a time (a node has one per folder): which slot holds a task's newest
    checkpoint is learnt once and then kept here, and the per-task locks that keep a read from a
    slot being written are this store's.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._tasks: dict[str, _Task] = {}
        self._tasks_lock = threading.Lock()

    def write(self, record: CheckpointRecord) -> Path:
        """Make `record` durable, then drop the task's older checkpoints.

        A record not yet verified here (one that came from a peer) has its SHA-256 checked
        before it replaces anything; from PARALLEL_HASH_FROM bytes on, in a second thread while
        the state is written and synced, so the check adds no wait to a migration's hand-off.
        Any failure (hash, write, fsync, rename, directory fsync) raises CheckpointError and
        leaves the previous checkpoint exactly as it was. A record whose state this store wrote
        while it arrived (`incoming`) is only synced, checked and renamed into place.
        """
        check_task_id(record.task_id)
        if record.staged is not None and record.staged.store is self and not record.staged.installed:
            return self._install_staged(record)
        if record.verified:
            return self._write_durably(record)[0]
        if record.size < PARALLEL_HASH_FROM:
            return self._write_durably(record.verify())[0]
        return self._write_durably(record, in_thread(functools.partial(_digest, record._identity(), record.state)))[0]

    def commit(
        self,
        *,
        task_id: str,
        plugin_name: str,
        plugin_version: str,
        plugin_hash: str,
        unit_index: int,
        epoch: int,
        seq: int,
        taken_at: float,
        state: bytes | Sequence[bytes],
        staged: IncomingCheckpoint | None = None,
    ) -> CheckpointRecord:
        """Seal and write in one go; same guarantees as `write`, faster for big states.

        `state` is the encoded state, whole or as pieces to concatenate. From PARALLEL_HASH_FROM
        bytes on, SHA-256 runs in a second thread while the state goes to disk: each is about
        one pass over memory, and both hashlib and os.write release the GIL. `staged`: the state
        was written and hashed while it arrived (`receiving`, with the same identity), so only
        the rest of it, the header with the hash, the fsync and the rename remain.
        """
        check_task_id(task_id)
        whole = state if isinstance(state, bytes) else b"".join(state)
        unsealed = CheckpointRecord(task_id, plugin_name, plugin_version, plugin_hash, unit_index, epoch, seq,
                                    float(taken_at), state=whole, sha256=_PLACEHOLDER)
        if staged is not None:
            return self._seal_staged(unsealed, staged)
        if len(whole) < PARALLEL_HASH_FROM:
            record = dataclasses.replace(unsealed, sha256=_digest(unsealed._identity(), whole), verified=True)
            return self._write_durably(record)[1]
        digest = in_thread(functools.partial(_digest, unsealed._identity(), whole))
        return self._write_durably(unsealed, digest)[1]

    def copy_handed(self, source: int, size: int, limit: int, sha256: Future[str],
                    **identity: Any) -> Future[StoredCheckpoint]:
        """`commit_handed` in a worker thread, started at once: the guest's hash may still be on its way."""
        return in_thread(functools.partial(self.commit_handed, source, size, limit, sha256, **identity))

    def commit_handed(self, source: int, size: int, limit: int, sha256: Future[str],
                      **identity: Any) -> StoredCheckpoint:
        """Copy `size` bytes from the start of `source`, a guest's checkpoint memfd, into a file kernel to kernel
        (never mapped: a guest that truncates it meanwhile makes the copy short, a CheckpointError, not a
        SIGBUS), then, once `sha256` (the guest's hash of identity and state) is known, write the header and
        make it durable: in a slot under SLOTS_BELOW bytes (fdatasync), else a temp file (fsync, rename,
        fsync the directory). Until `sha256` is done the guest may still be writing its memfd: the copy
        follows it (`_copy_range`), so the two overlap.

        The guest may lie about the hash or change its memfd during the copy: it ruins only its own
        checkpoint, which then fails its check when read (as a guest could send any garbage state).
        Any failure, `sha256`'s included, raises CheckpointError and leaves the previous checkpoint
        exactly as it was; a `size` not in 1..`limit` does so before anything is copied. The record
        keeps its state in the file (`StoredCheckpoint`).
        """
        if not 0 < size <= limit:
            raise CheckpointError(f"checkpoint {identity['seq']} of task {identity['task_id']}: the guest's state "
                                  f"is {size} bytes, over the limit of {limit}; the previous checkpoint is kept")
        check_task_id(identity["task_id"])
        unsealed = CheckpointRecord(**identity, state=b"", sha256=_PLACEHOLDER)
        offset = len(encode_header(unsealed, size))
        fill = functools.partial(_hand_in, source, size, offset, sha256, unsealed)
        return self._commit_claimed(unsealed, offset + size, fill, functools.partial(_stored, offset, size))

    def commit_claimed(self, state: bytes, claimed: Callable[[], str], **identity: Any) -> CheckpointRecord:
        """Make a guest's state durable under the hash the guest took of it, which comes after the state:
        the state is written while the guest hashes, then `claimed()` gives that hash (it may wait for it),
        then the header and the sync (see `commit_handed`, whose trust this shares: the record is not
        `verified`, and a guest that lies ruins only its own checkpoint). The node never hashes the state.
        Any failure, `claimed()`'s included, raises CheckpointError and leaves the previous checkpoint."""
        check_task_id(identity["task_id"])
        unsealed = CheckpointRecord(**identity, state=state, sha256=_PLACEHOLDER)
        offset = len(encode_header(unsealed))
        fill = functools.partial(_claim_in, offset, claimed, unsealed)
        return self._commit_claimed(unsealed, offset + len(state), fill)

    def _commit_claimed(
        self,
        unsealed: CheckpointRecord,
        length: int,
        fill: Callable[[int, Callable[[int], None]], CheckpointRecord],
        hold: Callable[[int, CheckpointRecord], StoredCheckpoint] | None = None,
    ) -> CheckpointRecord:
        """A guest's checkpoint sealed by its own hash (`fill` writes it): into a slot under SLOTS_BELOW bytes,
        else a temp file renamed into place; `hold`, if given, keeps reading it through its descriptor."""
        if length < SLOTS_BELOW:
            return self._into_slot(unsealed, length, fill, hold)[1]
        temp = self._folder(unsealed.task_id) / f"{TEMP_PREFIX}{unsealed.seq}-{secrets.token_hex(4)}"
        fd = -1
        try:
            fd = self._create(temp, os.O_RDWR)
            sealed = fill(fd, _sync)
        except CheckpointError:
            _close_quietly(fd)
            _remove_quietly(temp)
            raise
        except OSError as error:
            _close_quietly(fd)
            _remove_quietly(temp)
            raise _not_written(unsealed, error) from error
        try:
            self._install(temp, sealed)
        except BaseException:
            _close_quietly(fd)
            raise
        if hold is None:
            os.close(fd)
            return sealed
        return hold(fd, sealed)

    def _write_durably(
        self, record: CheckpointRecord, digest: Future[str] | None = None
    ) -> tuple[Path, CheckpointRecord]:
        """Into a slot under SLOTS_BELOW bytes, else a temp file renamed into place; the path and the sealed record.

        With `digest`: if `record` carries the placeholder hash, the digest's result replaces it
        once the state is written; otherwise the result must equal the record's hash, checked
        after the sync (so the two overlap) and before the checkpoint counts as the newest.
        """
        if record.size < SLOTS_BELOW:
            header = encode_header(record)
            return self._into_slot(record, len(header) + record.size,
                                   functools.partial(_fill, record=record, digest=digest, header=header))
        folder = self._folder(record.task_id)
        temp = folder / f"{TEMP_PREFIX}{record.seq}-{secrets.token_hex(4)}"
        try:
            fd = self._create(temp)
            try:
                record = _fill(fd, _sync, record=record, digest=digest)
            finally:
                os.close(fd)
        except CheckpointError:
            _remove_quietly(temp)
            raise
        except OSError as error:
            _remove_quietly(temp)
            raise _not_written(record, error) from error
        return self._install(temp, record), record

    def _into_slot(
        self,
        unsealed: CheckpointRecord,
        length: int,
        fill: Callable[[int, Callable[[int], None]], CheckpointRecord],
        hold: Callable[[int, CheckpointRecord], StoredCheckpoint] | None = None,
    ) -> tuple[Path, CheckpointRecord]:
        """Overwrite in place the slot that does not hold the task's newest valid checkpoint.

        `fill(fd, end)` writes the file's `length` bytes from offset 0, calls `end(fd)` (the sync) and
        returns the sealed record; `hold(fd, sealed)`, if given, makes the record that keeps reading the
        file through `fd` (else `fd` is closed). The task's lock keeps `latest` from reading the slot while
        it is torn. A failure removes the slot (it may even read whole) and leaves the newest checkpoint as
        it was. A slot that a `StoredCheckpoint` still reads is not overwritten: the new file is written
        beside it and renamed over its name, so the old inode stays with its reader.
        """
        folder = self._folder(unsealed.task_id)
        task = self._task(unsealed.task_id)
        with task.lock:
            self._learn(unsealed.task_id, task)
            target = folder / SLOT_NAMES[task.newest == folder / SLOT_NAMES[0]]
            reader = task.readers.pop(target, None)
            beside = None
            if reader is not None and reader() is not None:
                beside = folder / f"{TEMP_PREFIX}{unsealed.seq}-{secrets.token_hex(4)}"
            fd = -1
            try:
                if beside is not None:
                    fd = self._create(beside, os.O_RDWR)
                    sealed = fill(fd, _sync)
                    os.rename(beside, target)
                    _sync_directory(folder)
                else:
                    try:
                        fd, created = os.open(target, os.O_RDWR), False
                    except FileNotFoundError:
                        fd, created = self._create(target, os.O_RDWR), True
                    sealed = fill(fd, functools.partial(_end_slot, length))
                    if created:
                        _sync_directory(folder)  # the new slot's name, once: later writes change only its blocks
            except (CheckpointError, OSError) as error:
                _close_quietly(fd)
                for path in (beside, target):
                    if path is not None:
                        _remove_quietly(path)  # the slot may even read whole, but failed: the next write makes it anew
                if isinstance(error, CheckpointError):
                    raise
                raise _not_written(unsealed, error) from error
            if hold is None:
                os.close(fd)
                record = sealed
            else:
                record = hold(fd, sealed)
                task.readers[target] = weakref.ref(record)
            keep = {target, folder / SLOT_NAMES[target.name == SLOT_NAMES[0]]}
            if record.seq <= task.newest_seq:
                keep = {target}  # the one before would outrank it: what was written last is what resumes
            _drop_others(task, folder, keep, {task.newest})
            task.newest, task.newest_seq = target, record.seq
        return target, record

    def incoming(self, record: CheckpointRecord, size: int) -> IncomingCheckpoint:
        """Start writing the `size` bytes of `record`'s state, which are still arriving, to a temp file."""
        check_task_id(record.task_id)
        folder = self._folder(record.task_id)
        try:
            self._make_folder(folder)
            return IncomingCheckpoint(self, record, size, folder / f"{TEMP_PREFIX}{record.seq}-{secrets.token_hex(4)}")
        except OSError as error:
            raise _not_written(record, error) from error

    def receiving(self, size: int, **identity: Any) -> IncomingCheckpoint:
        """`incoming` for a checkpoint whose hash is not known yet: this node's own guest's, still on its
        way up the pipe (`commit` with `staged=` seals it once whole, with the hash its writer took as
        the pieces came), or a peer's sent while it was captured, its hash after it (`write` checks that
        hash against the one taken here)."""
        return self.incoming(CheckpointRecord(**identity, state=b"", sha256=_PLACEHOLDER), size)

    def _seal_staged(self, unsealed: CheckpointRecord, staged: IncomingCheckpoint) -> CheckpointRecord:
        if staged.record._identity() != unsealed._identity() or staged.store is not self:
            staged.abort()
            raise CheckpointError(f"checkpoint {unsealed.seq} of task {unsealed.task_id} was staged as another one")
        try:
            record = dataclasses.replace(unsealed, sha256=staged.finish(unsealed.state), verified=True)
        except OSError as error:
            staged.abort()
            raise _not_written(unsealed, error) from error
        self._install(staged.temp, record)
        staged.installed = True
        return record

    def _install_staged(self, record: CheckpointRecord) -> Path:
        """A staged state, once written: synced and checked (by its writer), then renamed into place."""
        staged = record.staged
        assert staged is not None
        try:
            record._check(staged.finish(record.state))
        except CheckpointError:
            staged.abort()
            raise
        except OSError as error:
            staged.abort()
            raise _not_written(record, error) from error
        final = self._install(staged.temp, record)
        staged.installed = True
        return final

    def _install(self, temp: Path, record: CheckpointRecord) -> Path:
        """Rename a synced temp file into place, fsync the directory, then drop the task's other checkpoints."""
        folder = temp.parent
        final = folder / f"{record.seq:016d}{SUFFIX}"
        task = self._task(record.task_id)
        with task.lock:
            try:
                os.rename(temp, final)
            except OSError as error:
                _remove_quietly(temp)
                raise _not_written(record, error) from error
            try:
                _sync_directory(folder)
            except OSError as error:
                _remove_quietly(final)
                raise CheckpointError(
                    f"checkpoint {record.seq} of task {record.task_id} could not be made durable "
                    f"(directory fsync: {error.strerror or error}); the previous checkpoint is kept"
                ) from error
            _drop_others(task, folder, {final}, {task.newest, folder / SLOT_NAMES[0], folder / SLOT_NAMES[1]})
            task.newest, task.newest_seq, task.known = final, record.seq, True
        return final

    def latest(self, task_id: str) -> CheckpointRecord | None:
        """The newest checkpoint of `task_id` that verifies; unreadable ones are logged and skipped."""
        check_task_id(task_id)
        task = self._task(task_id)
        with task.lock:
            return self._newest_valid(task_id, task)

    def _learn(self, task_id: str, task: _Task) -> None:
        """Find which file holds the task's newest valid checkpoint, once per task and process (under its lock):
        a slot write must never overwrite the only valid copy, nor one a crash left newer than it thinks."""
        if not task.known:
            self._newest_valid(task_id, task)

    def _newest_valid(self, task_id: str, task: _Task) -> CheckpointRecord | None:
        for path in self.files(task_id):
            try:
                record = read_record(path)
            except (CheckpointError, OSError) as error:
                log.warning("skipping unreadable checkpoint %s: %s", path, error)
                continue
            if record.task_id != task_id:
                log.warning("skipping checkpoint %s: it belongs to task %s", path, record.task_id)
                continue
            if not task.known:
                task.newest, task.newest_seq, task.known = path, record.seq, True
            return record
        if not task.known:
            task.newest, task.newest_seq, task.known = None, -1, True
        return None

    def holds(self, task_id: str) -> bool:
        """Whether the task has a folder here: without one it has no checkpoint, and `latest` and `discard`
        have nothing to do. One stat, cheap enough for the node's loop (a thread hop costs ~0.1 ms of CPU)."""
        return self._folder(task_id).is_dir()

    def discard(self, task_id: str) -> None:
        """Remove every checkpoint of a task (after its result is safe, or when it moved away)."""
        check_task_id(task_id)
        task = self._task(task_id)
        with task.lock:
            with self._tasks_lock:
                self._tasks.pop(task_id, None)
            folder = self._folder(task_id)
            if not folder.is_dir():
                return
            for path in folder.iterdir():
                if path.suffix == SUFFIX or path.name.startswith(TEMP_PREFIX):
                    path.unlink(missing_ok=True)
            try:
                folder.rmdir()
            except OSError as error:
                log.warning("kept checkpoint folder %s: %s", folder, error)

    def list_tasks(self) -> list[str]:
        """Task ids that have at least one checkpoint file (not yet verified)."""
        if not self.root.is_dir():
            return []
        return sorted(
            folder.name
            for folder in self.root.iterdir()
            if folder.is_dir() and _TASK_ID.match(folder.name) and any(folder.glob(f"*{SUFFIX}"))
        )

    def _folder(self, task_id: str) -> Path:
        return self.root / task_id

    def _task(self, task_id: str) -> _Task:
        with self._tasks_lock:
            return self._tasks.setdefault(task_id, _Task())

    def files(self, task_id: str) -> list[Path]:
        """The task's checkpoint files: those whose header does not read first (so a reader says why it skips
        them), then the others by their header's seq, highest first (none verified yet)."""
        folder = self._folder(task_id)
        if not folder.is_dir():
            return []
        return sorted(folder.glob(f"*{SUFFIX}"), key=_header_seq, reverse=True)

    def _create(self, temp: Path, access: int = os.O_WRONLY) -> int:
        """Open a new temp file; its task's folder is made only when missing (no stat on every commit)."""
        try:
            return os.open(temp, access | os.O_CREAT | os.O_EXCL, 0o600)
        except FileNotFoundError:
            self._make_folder(temp.parent)
            return os.open(temp, access | os.O_CREAT | os.O_EXCL, 0o600)

    def _make_folder(self, folder: Path) -> None:
        if folder.is_dir():
            return
        self.root.mkdir(parents=True, exist_ok=True)
        folder.mkdir(exist_ok=True)
        _sync_directory(self.root)


@dataclass
class _Task:
    """What this process knows of one task's folder. The lock orders slot writes, installs and reads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    known: bool = False
    """Whether `newest` was learnt here (by a write, or by reading every newer file and finding it invalid)."""
    newest: Path | None = None
    """The file that holds the task's newest valid checkpoint."""
    newest_seq: int = -1
    readers: dict[Path, weakref.ref[StoredCheckpoint]] = field(default_factory=dict)
    """The slots a `StoredCheckpoint` reads through its descriptor: written beside and renamed over, never in place."""
    tidy: bool = False
    """Whether this process removed what a crash or an earlier run left in the folder (temp files, old names)."""


def _drop_others(task: _Task, folder: Path, keep: set[Path], others: set[Path | None]) -> None:
    """Remove the task's checkpoint files but `keep`: `others` (those this process knows of), or, the first
    time, whatever the folder holds (listing it once per task and process, where a scan a commit would cost)."""
    if task.tidy:
        for other in others - keep - {None}:
            _remove_replaced(other)
        return
    for other in folder.iterdir():
        if other not in keep and (other.suffix == SUFFIX or other.name.startswith(TEMP_PREFIX)):
            _remove_quietly(other)
    task.tidy = True


class IncomingCheckpoint:
    """A peer's checkpoint written and hashed while its state arrives, by two threads of its own.

    `filled` hands over each next piece of the state, in the place where it will stay; `finish`
    writes what was not handed over, fsyncs and returns the SHA-256 (a record still without
    one, from `CheckpointStore.receiving`, gets it in its header first). Nothing is renamed into
    place here: `CheckpointStore.write` does that once the host takes the unit, so a refused or
    broken transfer leaves only a temp file, which `abort` removes (as does the task's next
    durable write, after a crash).
    """

    def __init__(self, store: CheckpointStore, record: CheckpointRecord, size: int, temp: Path) -> None:
        self.store, self.temp, self.installed, self.record = store, temp, False, record
        self._aborted = self._ended = False
        self._size = size
        self._handed = 0
        self._pieces: queue.SimpleQueue[memoryview | threading.Event | None] = queue.SimpleQueue()
        self._to_hash: queue.SimpleQueue[memoryview | threading.Event | None] = queue.SimpleQueue()
        self._digest = in_thread(functools.partial(self._hash, hashlib.sha256(encode(list(record._identity())))))
        """The state's hash, taken beside the writing: each is one pass over memory, and both release the GIL."""
        self._done: Future[str] = Future()
        header = encode_header(record, size)
        self._fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(self._fd, header)  # a few hundred bytes: one write
        except BaseException:
            os.close(self._fd)
            _remove_quietly(temp)
            raise
        self._offset = len(header)
        threading.Thread(target=self._run, name="checkpoint-incoming", daemon=True).start()

    def filled(self, piece: memoryview) -> None:
        """The next bytes of the state; the caller keeps them unchanged until `wait_written` returns."""
        self._handed += len(piece)
        self._pieces.put(piece)
        self._to_hash.put(piece)

    def wait_written(self) -> None:
        """Block until every piece handed over has been written and hashed (the caller may then let go of them)."""
        written, hashed = threading.Event(), threading.Event()
        self._pieces.put(written)
        self._to_hash.put(hashed)
        written.wait()
        hashed.wait()

    def digest(self, state: bytes) -> str:
        """Hand over the rest of `state` and return the SHA-256 of identity and state once it is
        hashed, while the writer may still be writing it and has its fsync ahead: a move sends the
        state meanwhile (OSError if it was aborted)."""
        if len(state) != self._size:
            raise OSError(f"the state is {len(state)} bytes, not the {self._size} announced")
        if self._aborted:
            raise OSError(f"checkpoint {self.record.seq} of task {self.record.task_id} was aborted")
        if not self._ended:
            self._ended = True
            rest = memoryview(state)[self._handed:]
            self._pieces.put(rest)
            self._to_hash.put(rest)
            self._pieces.put(None)
            self._to_hash.put(None)
        return self._digest.result()

    def finish(self, state: bytes) -> str:
        """Write the rest of `state`, fsync, and return the SHA-256 of identity and state (OSError on failure)."""
        self.digest(state)
        return self._done.result()

    def abort(self) -> None:
        """Stop writing and remove the temp file, unless it was installed."""
        self._aborted = self._ended = True
        self._pieces.put(None)
        self._to_hash.put(None)
        try:
            self._done.result()
        except OSError as error:
            log.debug("incoming checkpoint %s failed: %s", self.temp.name, error)
        if not self.installed:
            _remove_quietly(self.temp)

    def _run(self) -> None:
        """Write each piece; after the last one (None), seal the header with the hash, fsync; a failure skips the rest."""
        failure: OSError | None = None
        synced = self._offset
        while (piece := self._pieces.get()) is not None:
            if isinstance(piece, threading.Event):
                piece.set()
            elif failure is None:
                try:
                    _write_all(self._fd, piece, self._offset)
                    self._offset += len(piece)
                    if self._offset - synced >= WRITE_CHUNK:  # as `_write_all` does for a whole state
                        _start_writeback(self._fd, synced, self._offset - synced)
                        synced = self._offset
                except OSError as error:
                    failure = error
            del piece  # let go of the caller's buffer before waiting for the next piece
        digest = self._digest.result()
        try:
            if failure is None and not self._aborted:
                if self.record.sha256 == _PLACEHOLDER:  # same length: the digest is fixed-size hex
                    sealed = dataclasses.replace(self.record, sha256=digest)
                    os.pwrite(self._fd, encode_header(sealed, self._size), 0)
                _sync(self._fd)
        except OSError as error:
            failure = error
        finally:
            os.close(self._fd)
        if failure is not None:
            self._done.set_exception(failure)
        else:
            self._done.set_result(digest)

    def _hash(self, hasher: Any) -> str:
        """Hash each piece as `_run` writes it, until the last one (None)."""
        while (piece := self._to_hash.get()) is not None:
            if isinstance(piece, threading.Event):
                piece.set()
            else:
                hasher.update(piece)
            del piece  # let go of the caller's buffer before waiting for the next piece
        return hasher.hexdigest()


def _header_seq(path: Path) -> int:
    """The seq in a checkpoint file's header (one read of at most HEADER_CAP bytes and its prefix); above any seq
    if it does not read."""
    try:
        with open(path, "rb") as file:
            head = file.read(len(MAGIC) + _LENGTH.size + HEADER_CAP)
        (length,) = _LENGTH.unpack_from(head, len(MAGIC))
        if head[:len(MAGIC)] == MAGIC and len(head) >= len(MAGIC) + _LENGTH.size + length:
            return decode_header(head[len(MAGIC) + _LENGTH.size:][:length])["seq"]
    except (OSError, struct.error, CheckpointError):
        pass
    return 1 << 64


def _fill(fd: int, end: Callable[[int], None], *, record: CheckpointRecord,
          digest: Future[str] | None, header: bytes | None = None) -> CheckpointRecord:
    """Write header and state from the start of `fd`, then `end(fd)` (the sync); the record, sealed or checked
    against `digest` (see `CheckpointStore._write_durably`). CheckpointError on a hash mismatch, else OSError.
    `header`: `record`'s, if the caller encoded it already (it is encoded once where the hash is known)."""
    sealing = digest is not None and record.sha256 == _PLACEHOLDER
    try:
        header = encode_header(record) if header is None else header
        if digest is None and record.size < PARALLEL_HASH_FROM:
            write_pieces(fd, [header, record.state])  # hashed already: one writev
        else:
            _write_all(fd, record.state, len(header))
            if sealing:
                record = dataclasses.replace(record, sha256=digest.result(), verified=True)
                header = encode_header(record)  # same length: the digest is fixed-size hex
            os.pwrite(fd, header, 0)
        end(fd)
        if digest is not None and not sealing:
            record._check(digest.result())
            record = dataclasses.replace(record, verified=True)
    finally:
        if digest is not None:
            digest.result()  # never leave the hashing thread behind, even on failure
    return record


def _hand_in(source: int, size: int, offset: int, sha256: Future[str], unsealed: CheckpointRecord,
             fd: int, end: Callable[[int], None]) -> CheckpointRecord:
    """Copy a guest's memfd into `fd` after the header's `offset` bytes, then write the header with the guest's
    hash and `end(fd)` (the sync); the record sealed with that hash (see `CheckpointStore.commit_handed`).

    If the hash is still to come once the state is copied, the state's blocks are synced meanwhile, so the
    last sync has only the header left. A guest hands states from 4 MiB on (`child.HAND_OUT_FROM`) and
    hashes them after its answer up to 16 MiB, so at 10 MiB its 5 ms of hashing outlast the node's copy.
    (Until 2026-11-28 only temp files synced first: when 1 MiB states were handed too, a slot's second sync read
    0.13-0.15 of raw write+fsync below the pipe, 0.05-0.09 without it.)"""
    try:
        _copy_range(source, fd, size, offset, sha256)
        if not sha256.done():
            _sync_data(fd)
    finally:
        digest = sha256.result()  # never left unread, even on failure
    return _seal_claimed(fd, end, unsealed, size, digest)


def _claim_in(offset: int, claimed: Callable[[], str], unsealed: CheckpointRecord,
              fd: int, end: Callable[[int], None]) -> CheckpointRecord:
    """Write `unsealed`'s state into `fd` after the header's `offset` bytes, then the header with the hash
    `claimed()` gives and `end(fd)` (see `CheckpointStore.commit_claimed`)."""
    _write_all(fd, unsealed.state, offset)
    return _seal_claimed(fd, end, unsealed, unsealed.size, claimed())


def _seal_claimed(fd: int, end: Callable[[int], None], unsealed: CheckpointRecord, size: int,
                  digest: object) -> CheckpointRecord:
    """Write the header with a guest's `digest` of its state at the start of `fd`, then `end(fd)` (the sync)."""
    if not isinstance(digest, str) or not _HEX_DIGEST.match(digest):
        raise CheckpointError(f"checkpoint {unsealed.seq} of task {unsealed.task_id} came with a "
                              "malformed hash; the previous checkpoint is kept")
    sealed = dataclasses.replace(unsealed, sha256=digest)
    os.pwrite(fd, encode_header(sealed, size), 0)  # same length: the digest is fixed-size hex
    end(fd)
    return sealed


def _stored(offset: int, size: int, fd: int, sealed: CheckpointRecord) -> StoredCheckpoint:
    return StoredCheckpoint(fd, offset, size, **dict(zip(IDENTITY, sealed._identity())), sha256=sealed.sha256)


def _end_slot(length: int, fd: int) -> None:
    """Cut a slot much longer than its new `length` bytes, then fdatasync: its inode's times need not be durable."""
    if os.fstat(fd).st_size > TRIM_OVER * max(length, 4096):
        os.ftruncate(fd, length)
    _sync_data(fd)


def _digest(identity: tuple[Any, ...], *pieces: bytes) -> str:
    """SHA-256 over the identity and the state; with SHA-NI (measured here) it beats BLAKE2b twofold."""
    hasher = hashlib.sha256(encode(list(identity)))
    for piece in pieces:
        hasher.update(piece)
    return hasher.hexdigest()


def in_thread(work: Callable[[], Any]) -> Future[Any]:
    """Run `work` in one of `_workers`' threads, beside the caller."""
    return _workers.submit(work)


class _Workers:
    """Long-lived threads for a checkpoint's side work (hashing beside the write, freeing a replaced file).

    Handing a job to a waiting thread costs a queue put, where starting a thread waits until the new
    one runs (a whole scheduler slice on a busy machine). A job finding every thread busy starts one
    more, so jobs never wait on each other; a forked child, which has no copy of the threads, starts anew.
    """

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._idle = 0
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()

    def submit(self, work: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._idle:
                self._idle -= 1
            else:
                threading.Thread(target=self._run, args=(self._jobs,), name="checkpoint-work", daemon=True).start()
            self._jobs.put((work, future))
        return future

    def _run(self, jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]]) -> None:
        while True:
            work, future = jobs.get()
            try:
                future.set_result(work())
            except BaseException as error:  # handed to whoever waits on the future
                future.set_exception(error)
            del work, future  # hold no state while waiting for the next job
            with self._lock:
                self._idle += 1


_workers = _Workers()


def _write_all(fd: int, data: bytes, offset: int) -> None:
    """Write `data` at `offset` (the current position), starting writeback of each chunk at once.

    Without the nudge the kernel holds the whole state in dirty pages until fsync and only then
    starts writing; with it the disk works while later chunks are copied and the hash finishes.
    It also drops the written pages from the cache once they are on disk: a checkpoint is rarely
    read back, so it need not push the owner's files out of memory.
    """
    os.lseek(fd, offset, os.SEEK_SET)
    view = memoryview(data)
    while view:
        written = os.write(fd, view[:WRITE_CHUNK])
        if len(data) >= PARALLEL_HASH_FROM:  # a small state costs one journal commit either way
            _start_writeback(fd, offset, written)
        view = view[written:]
        offset += written


def _copy_range(source: int, fd: int, size: int, offset: int, whole: Future[str]) -> None:
    """Copy `size` bytes from the start of `source` to `fd` at `offset`, kernel to kernel; OSError if `source`
    holds fewer. Through a pipe of our own with splice (as fast as a write from memory, measured: sendfile from
    a memfd ran 25 % slower at 10-100 MB), else sendfile; from PARALLEL_HASH_FROM bytes on, each chunk's
    writeback started as it lands, as `_write_all` does.

    `whole`: done once the guest has written all of `source` (its hash came). Until then only what
    `source` holds already is copied, following it as the guest writes it (a memfd's size grows page
    by page as a write lands, and the guest empties it first), looked at every FOLLOW_POLL seconds."""
    splice = getattr(os, "splice", None)
    pipe = os.pipe() if splice is not None else None
    try:
        if pipe is not None:
            with contextlib.suppress(OSError):  # a smaller pipe only costs more turns
                fcntl.fcntl(pipe[1], getattr(fcntl, "F_SETPIPE_SZ", 1031), SPLICE_CHUNK)
        else:
            os.lseek(fd, offset, os.SEEK_SET)  # sendfile writes where the file stands
        done, poll = 0, FOLLOW_POLL
        while done < size:
            ready = size
            if not whole.done():
                ready = min(size, os.fstat(source).st_size)
                if ready <= done:
                    futures.wait([whole], timeout=poll)
                    poll = min(poll * 2, FOLLOW_POLL_MAX)
                    continue
                poll = FOLLOW_POLL
            want = min(ready - done, SPLICE_CHUNK)
            if pipe is None:
                moved = os.sendfile(fd, source, done, want)
            else:
                moved = splice(source, pipe[1], want, offset_src=done)
                landed = 0
                while landed < moved:
                    landed += splice(pipe[0], fd, moved - landed, offset_dst=offset + done + landed)
            if not moved:
                raise OSError(errno.EIO, f"the guest's memfd holds {done} bytes, not the {size} it announced")
            if size >= PARALLEL_HASH_FROM:
                _start_writeback(fd, offset + done, moved)
            done += moved
    finally:
        if pipe is not None:
            os.close(pipe[0])
            os.close(pipe[1])


def _start_writeback(fd: int, offset: int, length: int) -> None:
    """Begin writing a range to disk without waiting (Linux and BSD); elsewhere fsync does it all."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is not None:
        advise(fd, offset, length, os.POSIX_FADV_DONTNEED)


def _sync(fd: int) -> None:
    """fsync, or F_FULLFSYNC on macOS where plain fsync stops at the drive's cache."""
    full_sync = getattr(fcntl, "F_FULLFSYNC", None)
    if full_sync is not None:
        try:
            fcntl.fcntl(fd, full_sync)
            return
        except OSError as error:
            log.debug("F_FULLFSYNC not supported here (%s); using fsync", error)
    os.fsync(fd)


def _sync_data(fd: int) -> None:
    """fdatasync (F_FULLFSYNC on macOS, which has no fdatasync that reaches the platter)."""
    if getattr(fcntl, "F_FULLFSYNC", None) is not None or not hasattr(os, "fdatasync"):
        _sync(fd)
    else:
        os.fdatasync(fd)


def _sync_directory(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _not_written(record: CheckpointRecord, error: OSError) -> CheckpointError:
    return CheckpointError(
        f"checkpoint {record.seq} of task {record.task_id} was not written ({error.strerror or error}); "
        "the previous checkpoint is kept"
    )


def _remove_replaced(path: Path) -> None:
    """Remove the checkpoint a newer durable one replaced: the name at once, the blocks off the commit's path.

    With the file still open, the unlink only drops the name; the last close, in one of `_workers`' threads,
    frees the blocks and the cached pages (ext4: ~0.3 ms for 1 MB, ~25 ms for 100 MB), which no
    commit need wait for.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        _remove_quietly(path)  # already gone, or unreadable: a plain unlink then
        return
    try:
        _remove_quietly(path)
    finally:
        _workers.submit(functools.partial(_release, fd))


def _release(fd: int) -> None:
    try:
        os.close(fd)
    except OSError as error:
        log.warning("could not release a replaced checkpoint: %s", error)


def _close_quietly(fd: int) -> None:
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as error:
        log.warning("could not remove %s: %s", path, error)
