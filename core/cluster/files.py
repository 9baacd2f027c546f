"""Input files of assignments: kept by content hash at the master, fetched whole into a host's cache.

The idea is Dynamite's remote file access over GASS: a unit's input files stay at its origin
(the assignment's master), and a host fetches a whole file on the unit's first open, keeps it
in a local cache and serves every later open from there. Files are named by their SHA-256, so
a cached copy is verified once, shared by every unit that reads the same bytes, and a unit
that moves fetches from its master again, never from the host it left: no residual
dependency on a former host. Output files travel the other way inside checkpoints and
results (see guest/envelope.py).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from frost_core.api.errors import ConfigError, FrostError, NodeUnavailableError, PluginError, ProtocolError
from frost_core.guest.views import GuestTask, InputFile
from frost_core.plugin.limits import check_file_name
from frost_core.wire.transport import NetworkTransport
from frost_core.wire.channel import Address, Channel
from frost_core.wire.codes import MessageCode
from frost_core.wire.messages import Message, register
from frost_core.wire.stall import stall_deadline

log = logging.getLogger("frost.files")

MAX_INPUT_BYTES = 4 * 1024**3
"""Largest input file: a host must hold it in its cache, a desk machine's disk is not a file server."""
MAX_INPUTS = 64
CHUNK_BYTES = 1024 * 1024
REPLY_TIMEOUT = 10.0
"""Seconds to connect and hear whether the master has the file, and at most between two of its chunks
(`wire.stall`: a big file over a slow link takes what the link needs)."""

_SHA256 = re.compile(r"[0-9a-f]{64}")


def check_sha256(value: str) -> str:
    """`value` if it is a lowercase hex SHA-256; ProtocolError if not (it becomes a file name)."""
    if not _SHA256.fullmatch(value):
        raise ProtocolError(f"{value[:80]!r} is not a SHA-256 hex digest")
    return value


@register
@dataclass(frozen=True)
class FileFetch(Message):
    """Host -> master, on a fresh channel: send me the file with this content hash."""

    CODE = MessageCode.FILE_FETCH
    MAX_SIZE = 256
    sha256: str


@register
@dataclass(frozen=True)
class FileData(Message):
    """Master -> host: the file's size, then its bytes as bulk chunks; or, with `refusal`, why not."""

    CODE = MessageCode.FILE_DATA
    MAX_SIZE = 2048
    sha256: str
    size: int
    refusal: str | None = None


class FileStore:
    """The master's copies of its assignments' input files, under root/<sha256>, read-only."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def add(self, source: Path, name: str) -> InputFile:
        """Copy `source` in as input file `name` (blocking: run it in a thread); ConfigError says what is wrong.

        The copy is hashed as it is written, fsynced and renamed into place, so a crash never
        leaves a half file under a real hash; the same bytes added twice are stored once.
        """
        try:
            check_file_name(name, "input file")
        except PluginError as error:
            raise ConfigError(error.message) from None
        source = Path(source)
        if not source.is_file():
            raise ConfigError(f"input {name!r}: {source} is not a file" if source.exists()
                              else f"input {name!r}: {source} does not exist")
        self.root.mkdir(parents=True, exist_ok=True)
        descriptor, partial = tempfile.mkstemp(dir=self.root, prefix=".partial-")
        try:
            digest, size = hashlib.sha256(), 0
            with os.fdopen(descriptor, "wb") as writer, open(source, "rb") as reader:
                while chunk := reader.read(CHUNK_BYTES):
                    size += len(chunk)
                    if size > MAX_INPUT_BYTES:
                        raise ConfigError(f"input {name!r}: {source} is over the limit of {MAX_INPUT_BYTES} bytes")
                    digest.update(chunk)
                    writer.write(chunk)
                writer.flush()
                os.fsync(writer.fileno())
            os.chmod(partial, 0o444)
            os.replace(partial, self.root / digest.hexdigest())
            _fsync_folder(self.root)
        except OSError as error:
            raise ConfigError(f"input {name!r}: cannot copy {source}: {error.strerror}") from error
        finally:
            Path(partial).unlink(missing_ok=True)
        return InputFile(name=name, sha256=digest.hexdigest(), size=size)

    def path(self, sha256: str) -> Path:
        """The stored file with this hash; FrostError if this node holds none."""
        path = self.root / check_sha256(sha256)
        if not path.is_file():
            raise FrostError(f"no input file {sha256[:12]} is stored here", title="Input file unavailable")
        return path


class FileCache:
    """A host's copies of other masters' input files, under root/<sha256>, each fetched once and verified."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._fetching: dict[str, trio.Lock] = {}

    async def get(self, input_file: InputFile, fetch: Callable[[Path], Awaitable[None]]) -> Path:
        """The cached copy of `input_file`, calling `fetch(path)` to write it first if it is not here yet.

        Units opening the same file at once wait for one download. The bytes must match the
        size and hash the assignment declared, or nothing is kept (ProtocolError).
        """
        sha256 = check_sha256(input_file.sha256)
        if not 0 <= input_file.size <= MAX_INPUT_BYTES:
            raise ProtocolError(f"input file {input_file.name!r} claims {input_file.size} bytes, over the limit")
        path = self.root / sha256
        lock = self._fetching.setdefault(sha256, trio.Lock())
        try:
            async with lock:
                if await trio.to_thread.run_sync(_has_size, path, input_file.size):
                    return path
                await trio.to_thread.run_sync(lambda: self.root.mkdir(parents=True, exist_ok=True))
                partial = self.root / f".partial-{sha256}"
                try:
                    await fetch(partial)
                    await trio.to_thread.run_sync(_verify_and_keep, partial, path, input_file)
                finally:
                    partial.unlink(missing_ok=True)
                log.info("fetched input file %s (%d bytes) into the cache", input_file.name, input_file.size)
                return path
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._fetching.pop(sha256, None)


def install_files(transport: NetworkTransport, store: FileStore) -> None:
    """Answer FileFetch requests from peers on `transport` with files from `store` (only those)."""

    async def answer(channel: Channel, request: Message) -> None:
        assert isinstance(request, FileFetch)
        await send_file(channel, store, request.sha256)

    transport.set_stream_handler(MessageCode.FILE_FETCH, answer)


async def send_file(channel: Channel, store: FileStore, sha256: str) -> None:
    """One FileData and the file's bytes, or a refusal for a hash that is not one of the stored files."""
    try:
        path = store.path(sha256)
        handle = await trio.open_file(path, "rb")
    except (FrostError, OSError) as error:
        reason = error.message if isinstance(error, FrostError) else f"cannot read it: {error.strerror}"
        log.warning("refused input file %s to %s: %s", sha256[:80], channel.peer_address, reason)
        await channel.send(FileData(sha256=sha256[:80], size=0, refusal=reason))
        return
    async with handle:
        size = os.fstat(handle.fileno()).st_size
        await channel.send_bulk(FileData(sha256=sha256, size=size), _chunks(handle))


async def _chunks(handle: Any) -> AsyncIterator[bytes]:
    """The file in bulk-sized reads, each in a worker thread, so a big file never stalls the node."""
    while chunk := await handle.read(CHUNK_BYTES):
        yield chunk


async def fetch_file(transport: NetworkTransport, address: Address, input_file: InputFile, cache: FileCache) -> Path:
    """The local path of `input_file`: from `cache`, or fetched whole from the node at `address` first.

    NodeUnavailableError when that node cannot be reached in time; FrostError when it has no
    such file; ProtocolError when what arrives is not the file that was asked for.
    """

    async def download(destination: Path) -> None:
        await _download(transport, address, input_file, destination)

    return await cache.get(input_file, download)


async def _download(transport: NetworkTransport, address: Address, input_file: InputFile, destination: Path) -> None:
    where = f"{address[0]}:{address[1]}"
    try:
        with stall_deadline(REPLY_TIMEOUT) as deadline:
            async with await transport.connect(address) as channel:
                await channel.send(FileFetch(sha256=input_file.sha256))
                reply = await channel.receive()
                if not isinstance(reply, FileData) or reply.sha256 != input_file.sha256:
                    raise ProtocolError(f"{where} answered a fetch of input file {input_file.name!r} with "
                                        f"{type(reply).__name__} for another file")
                if reply.refusal is not None:
                    raise FrostError(f"{where} has no input file {input_file.name!r}: {reply.refusal}",
                                     title="Input file unavailable")
                if reply.size != input_file.size:
                    raise ProtocolError(f"{where} offers input file {input_file.name!r} with {reply.size} bytes, "
                                        f"not the {input_file.size} it was submitted with")
                async with await trio.open_file(destination, "wb") as writer:
                    async for chunk in channel.iterate_bulk_data(max_size=input_file.size):
                        deadline.moved()
                        await writer.write(chunk)
    except trio.TooSlowError:
        raise NodeUnavailableError(f"fetching input file {input_file.name!r} from {where}: nothing came for "
                                   f"{REPLY_TIMEOUT:g} s") from None
    except (OSError, trio.BrokenResourceError, trio.EndOfChannel) as error:
        raise NodeUnavailableError(f"cannot fetch input file {input_file.name!r} from {where}: {error}") from error


class InputFiles:
    """Where this node's guests find their input files, and what it serves to other nodes' guests.

    A unit whose master is this node reads the master's own stored copy (master -> master,
    remote -> master); any other unit's files come from its master into the cache
    (master -> remote, remote -> remote). `open` is the GuestSupervisor's `open_input`.
    """

    def __init__(self, *, node_id: str, data_dir: Path, address_of: Callable[[str], Address | None]) -> None:
        self.node_id = node_id
        self.store = FileStore(Path(data_dir) / "files")
        self.cache = FileCache(Path(data_dir) / "file-cache")
        self._address_of = address_of
        self._transport: NetworkTransport | None = None

    def install(self, transport: NetworkTransport) -> None:
        """Answer peers' requests for this master's files on `transport`, and fetch through it."""
        self._transport = transport
        install_files(transport, self.store)

    async def open(self, task: GuestTask, input_file: InputFile) -> Path:
        if task.origin == self.node_id:
            return self.store.path(input_file.sha256)
        address = self._address_of(task.origin)
        if address is None or self._transport is None:
            raise NodeUnavailableError(f"the master {task.origin[:8]} of {task.task_id} is not reachable for "
                                       f"input file {input_file.name!r}")
        return await fetch_file(self._transport, address, input_file, self.cache)


def _has_size(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size == size
    except FileNotFoundError:
        return False


def _verify_and_keep(partial: Path, path: Path, input_file: InputFile) -> None:
    """Hash and fsync the downloaded bytes; rename them into the cache only if they are the file asked for."""
    digest = hashlib.sha256()
    with open(partial, "rb") as reader:
        while chunk := reader.read(CHUNK_BYTES):
            digest.update(chunk)
        os.fsync(reader.fileno())
    if digest.hexdigest() != input_file.sha256:
        raise ProtocolError(f"input file {input_file.name!r} arrived with other bytes than it was submitted "
                            f"with (sha256 {digest.hexdigest()[:12]}, expected {input_file.sha256[:12]})")
    os.chmod(partial, 0o444)
    os.replace(partial, path)
    _fsync_folder(path.parent)


def _fsync_folder(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
