"""Plugin code fetched by content hash from a peer that has it (usually the assignment's master).

A host asked to run a unit whose plugin it lacks connects over the cluster's authenticated
transport, sends `PluginFetch(hash)` and gets a `PluginCode` header followed by the plugin's
archive as bulk chunks (or a header carrying only a refusal). The code is trusted only as far as
its hash: the registry keeps it only if it hashes to what was asked for, and validates it in a
throwaway subprocess like any other plugin before anything runs it.
"""

from __future__ import annotations

import dataclasses
import logging
import weakref

import trio

from frost_core.api.errors import PluginError, ProtocolError
from frost_core.plugin.archive import MAX_ARCHIVE_BYTES, pack_plugin
from frost_core.plugin.registry import PluginInfo, PluginRegistry
from frost_core.wire.transport import NetworkTransport
from frost_core.wire.channel import Address, Channel
from frost_core.wire.codes import MessageCode
from frost_core.wire.messages import Message, register
from frost_core.wire.stall import stall_deadline

__all__ = ["FETCH_TIMEOUT", "PluginCode", "PluginFetch", "fetch_plugin", "pack_plugin", "install_plugin_code"]

logger = logging.getLogger("frost.code_shipping")

FETCH_TIMEOUT = 30.0
"""Seconds a download may go without bytes moving (`wire.stall`): an archive of up to 16 MiB takes what the link
needs (over two minutes at 1 Mbit/s), one that stalls fails."""
_TEXT_CHARS = 500
"""Cut for the header's free texts, so a long plugin name or error never breaks its size cap."""
TURNED_OFF = "cluster plugins are turned off in this node's config (cluster.allow_cluster_plugins)"


@register
@dataclasses.dataclass(frozen=True)
class PluginFetch(Message):
    """Send me the plugin code with this content hash."""

    CODE = MessageCode.PLUGIN_FETCH
    MAX_SIZE = 256
    hash: str


@register
@dataclasses.dataclass(frozen=True)
class PluginCode(Message):
    """The answer to PluginFetch: the archive follows as bulk data, unless `refusal` says why not."""

    CODE = MessageCode.PLUGIN_CODE
    MAX_SIZE = 4096
    hash: str
    name: str = ""
    version: str = ""
    refusal: str = ""


def install_plugin_code(transport: NetworkTransport, registry: PluginRegistry) -> None:
    """Answer PluginFetch on `transport` with the code of any working plugin `registry` lists.

    Only peers holding the cluster key get this far (the transport's handshake), so the only
    checks left are that the hash names a plugin here and that the plugin works.
    """

    async def answer(channel: Channel, request: Message) -> None:
        assert isinstance(request, PluginFetch)
        try:
            info = registry.by_hash(request.hash)
            archive = await trio.to_thread.run_sync(pack_plugin, info.path)
        except PluginError as exc:
            logger.info("not sending plugin code %r to %s: %s", request.hash[:64], channel.peer_address, exc.message)
            await channel.send(PluginCode(hash=request.hash, refusal=exc.message[:_TEXT_CHARS]))
            return
        logger.info("sending plugin %s %s (%s, %d bytes) to %s", info.name, info.version, info.hash[:12],
                    len(archive), channel.peer_address)
        header = PluginCode(hash=info.hash, name=info.name[:_TEXT_CHARS], version=info.version[:_TEXT_CHARS])
        await channel.send_bulk(header, archive)

    transport.set_stream_handler(MessageCode.PLUGIN_FETCH, answer)


async def fetch_plugin(
    transport: NetworkTransport,
    address: Address,
    code_hash: str,
    registry: PluginRegistry,
    *,
    allowed: bool,
    timeout: float = FETCH_TIMEOUT,
) -> PluginInfo:
    """The working plugin with `code_hash`, fetched from the peer at `address` unless already here.

    `allowed` is the owner's `cluster.allow_cluster_plugins`; with it off, code that came from
    the cluster is not run even if it was fetched earlier. Concurrent calls for one hash share
    one download. Raises PluginError if the code cannot be had, does not match its hash, or is
    broken (it then stays listed as broken, with its reason).
    """
    installed = _installed(registry, code_hash, allowed=allowed)
    if installed is not None:
        return installed
    if not allowed:
        raise PluginError(TURNED_OFF)
    async with _download_lock(registry, code_hash):
        installed = _installed(registry, code_hash, allowed=allowed)
        if installed is not None:
            return installed  # a concurrent call fetched it while we waited
        archive = await _download(transport, address, code_hash, timeout)
        info = await registry.add_cluster_async(archive, code_hash)
    if not info.ok:
        raise PluginError(f"plugin {info.name!r} ({code_hash[:12]}) from {_where(address)} is broken: {info.error}")
    logger.info("fetched plugin %s %s (%s) from %s", info.name, info.version, code_hash[:12], _where(address))
    return info


def _installed(registry: PluginRegistry, code_hash: str, *, allowed: bool) -> PluginInfo | None:
    """The plugin if this node has it (PluginError if broken or not allowed); None to fetch it."""
    if not any(info.hash == code_hash for info in registry.plugins()):
        return None
    info = registry.by_hash(code_hash)
    if info.source == "cluster" and not allowed:
        raise PluginError(TURNED_OFF)
    return info


_download_locks: weakref.WeakKeyDictionary[PluginRegistry, dict[str, trio.Lock]] = weakref.WeakKeyDictionary()
"""Per registry (one per node) and hash; the locks go with their registry."""


def _download_lock(registry: PluginRegistry, code_hash: str) -> trio.Lock:
    return _download_locks.setdefault(registry, {}).setdefault(code_hash, trio.Lock())


async def _download(transport: NetworkTransport, address: Address, code_hash: str, timeout: float) -> bytes:
    """The archive for `code_hash` from `address`; transport failures become one PluginError."""
    try:
        with stall_deadline(timeout) as deadline:
            async with await transport.connect(address) as channel:
                await channel.send(PluginFetch(code_hash))
                header = await channel.receive()
                if not isinstance(header, PluginCode) or header.hash != code_hash:
                    raise ProtocolError(f"answered PluginFetch({code_hash[:12]}) with {header!r:.120}")
                if header.refusal:
                    raise PluginError(f"{_where(address)} did not send plugin code {code_hash[:12]}: {header.refusal}")
                return await channel.receive_bulk_data(max_size=MAX_ARCHIVE_BYTES, sink=deadline.watching())
    except trio.TooSlowError:
        raise PluginError(f"fetching plugin code {code_hash[:12]} from {_where(address)}: nothing came for "
                          f"{timeout:g} s") from None
    except (ProtocolError, trio.EndOfChannel, trio.BrokenResourceError, OSError) as exc:
        reason = exc.message if isinstance(exc, ProtocolError) else str(exc) or type(exc).__name__
        raise PluginError(f"fetching plugin code {code_hash[:12]} from {_where(address)} failed: {reason}") from exc


def _where(address: Address) -> str:
    return f"{address[0]}:{address[1]}"
