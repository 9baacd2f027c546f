"""The local control socket: how `frost-tui status`, `submit`, `pause`… reach a running node.

A Unix socket in the data dir, created with mode 0600 so only the owner's account can command
the node. A request is one typed command or query (`frost_core.api.commands`, `.queries`), named
by its class and checked against its type hints on arrival exactly as a wire message is; the
reply is checked the same way against the type the request declares as its `REPLY`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import struct
import sys
import typing
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from frost_core.config import Paths
from frost_core.api.commands import Command
from frost_core.api.errors import ConfigError, FrostError, NodeUnavailableError, ProtocolError
from frost_core.api.queries import FoundUnits, ListEvents, NodeStatus, Query
from frost_core.api.snapshot import AssignmentView
from frost_core.node.attach_protocol import AttachRequest
from frost_core.node.event_cbor import encoded_events
from frost_core.wire.channel import Channel
from frost_core.wire.pipe import read_bulk_data, read_frame, write_frame
from frost_core.wire.codec import decode_strict, encode
from frost_core.wire.codes import MessageCode
from frost_core.wire.messages import MAX_MESSAGE_SIZE, Message, from_plain, register, to_plain

log = logging.getLogger("frost.control")

CALL_TIMEOUT = 120.0

Request = Command | Query
REQUESTS: dict[str, type] = {cls.__name__: cls for cls in typing.get_args(Request)}
"""Every request the socket carries, by the class name that travels as `ControlRequest.kind`."""

Handler = Callable[[Request], Awaitable[Any]]
AttachHandler = Callable[[Channel, AttachRequest, Handler], Awaitable[None]]
Watcher = Callable[[int, bool], None]     # (client pid, connected?): its CPU is not the owner's meanwhile
LOCAL_PEERPID = 0x002                     # macOS: getsockopt(0 /* SOL_LOCAL */, LOCAL_PEERPID)


@register
@dataclasses.dataclass(frozen=True)
class ControlRequest(Message):
    CODE = MessageCode.CONTROL_REQUEST
    MAX_SIZE = 64 * 1024
    kind: str     # a class name from REQUESTS
    fields: bytes  # that class's fields as a CBOR map, decoded strictly by the node


@register
@dataclasses.dataclass(frozen=True)
class ControlReply(Message):
    CODE = MessageCode.CONTROL_REPLY
    MAX_SIZE = MAX_MESSAGE_SIZE
    ok: bool
    body: bytes = b""  # the request's REPLY as CBOR data, on success
    error_title: str = ""
    error_message: str = ""
    bulk: bool = False  # the body follows as a bulk transfer (an assignment of 10,000 units is megabytes)


INLINE_REPLY_BYTES = MAX_MESSAGE_SIZE // 2
"""A reply body up to this size travels inside its ControlReply frame; a larger one as bulk chunks."""
MAX_REPLY_BYTES = 64 * 1024 * 1024
"""The largest reply a client accepts: far above any real node's answer, well below harm."""


async def serve_control(
    path: Path, handler: Handler, attach: AttachHandler, *, watch: Watcher | None = None,
    task_status=trio.TASK_STATUS_IGNORED,
) -> None:
    """Answer control requests on `path` until cancelled; one bad client never hurts the node.

    A connection that opens with an AttachRequest belongs to an attached UI from then on.
    `watch` hears each client's pid when it connects and leaves, so the owner policy does not
    take a `frost-tui status` or an attached UI for the owner's own work.
    """
    listener = _bind(path)
    try:
        task_status.started()
        await trio.serve_listeners(lambda stream: _serve_watched(stream, handler, attach, watch), [listener])
    finally:
        path.unlink(missing_ok=True)


def node_answers(path: Path) -> bool:
    """True when a node listens on the control socket at `path` (a file left by a killed one does not)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def peer_pid(sock) -> int | None:
    """The connected client's pid: SO_PEERCRED on Linux, LOCAL_PEERPID on macOS; None elsewhere
    (the BSDs tell only the user), and then its CPU counts as the owner's."""
    try:
        if hasattr(socket, "SO_PEERCRED"):
            pid, _uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                    struct.calcsize("3i")))
            return pid or None
        if sys.platform == "darwin":
            return sock.getsockopt(0, LOCAL_PEERPID) or None
    except OSError:
        return None
    return None


async def _serve_watched(stream: trio.SocketStream, handler: Handler, attach: AttachHandler,
                         watch: Watcher | None) -> None:
    pid = peer_pid(stream.socket) if watch is not None else None
    if pid is not None:
        watch(pid, True)
    try:
        await _serve_client(stream, handler, attach)
    finally:
        if pid is not None:
            watch(pid, False)


MAX_SOCKET_PATH = 107
"""Bytes a Unix socket path may have on Linux (`sun_path` is 108, with the closing NUL)."""


def _fits(path: Path) -> Path:
    """`path`, or a ConfigError that says how to get a shorter one (the OS's own error names nothing)."""
    size = len(os.fsencode(path))
    if size > MAX_SOCKET_PATH:
        raise ConfigError(
            f"the control socket {path} is {size} bytes long, over the {MAX_SOCKET_PATH} a Unix socket allows: "
            "set XDG_RUNTIME_DIR (a login session has it) or choose a shorter --data-dir",
            title="Data dir too deep",
        )
    return path


def running_node_socket(paths: Paths) -> Path | None:
    """The socket of the node running for `paths.data_dir` (runtime dir first, then the data dir), or None."""
    candidates = dict.fromkeys((paths.control_socket, paths.data_dir_control_socket))
    return next((path for path in candidates if node_answers(path)), None)


def _bind(path: Path) -> trio.SocketListener:
    _fits(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.exists():
        if node_answers(path):
            raise FrostError(
                f"another node is already running with this data dir (its control socket {path} answers); "
                "give this one its own --data-dir", title="Node already running",
            )
        path.unlink()  # a stale socket left by a node that was killed
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(16)
    return trio.SocketListener(trio.socket.from_stdlib_socket(sock))


async def _serve_client(stream: trio.SocketStream, handler: Handler, attach: AttachHandler) -> None:
    channel = Channel(stream)
    try:
        while True:
            try:
                request = await channel.receive()
            except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if isinstance(request, AttachRequest):
                await attach(channel, request, handler)
                return
            if not isinstance(request, ControlRequest):
                raise ProtocolError(f"expected a control request, got {type(request).__name__}")
            await send_reply(channel, await answer_request(request, handler))
    except ProtocolError as error:
        log.warning("control client dropped: %s", error.message)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await channel.aclose()


async def answer_request(request: ControlRequest, handler: Handler) -> ControlReply:
    """Decode and check one request, run it, and encode its REPLY (or the FrostError that refused it)."""
    try:
        cls = REQUESTS.get(request.kind)
        if cls is None:
            raise ProtocolError(f"unknown control request {request.kind!r}")
        try:
            typed = from_plain(cls, decode_strict(request.fields))
        except ProtocolError as error:
            raise ProtocolError(f"bad {request.kind}: {error.message}") from None
        reply = await handler(typed)
        if isinstance(reply, UNIT_LISTS):
            return ControlReply(ok=True, body=await trio.to_thread.run_sync(reply_body, typed, reply))
        return ControlReply(ok=True, body=reply_body(typed, reply))
    except FrostError as error:
        return ControlReply(ok=False, error_title=error.title, error_message=error.message)
    except Exception as error:  # a bug behind one reply must not take the node and its guests down with it
        log.exception("answering %s failed", request.kind)
        return ControlReply(ok=False, error_title="Internal error",
                            error_message=f"the node could not answer {request.kind}: {type(error).__name__}: {error}"
                                          " (the node's log has the details)")


UNIT_LISTS = (AssignmentView, FoundUnits)
"""Replies that carry as many units as they were asked for: encoded in a worker thread (a 10,000-unit assignment
whole held the node's event loop 95 ms, `bench/query_cost.py`)."""


async def send_reply(channel: Channel, reply: ControlReply) -> None:
    """Send `reply`, its body as bulk chunks when it is too large for one frame."""
    if len(reply.body) <= INLINE_REPLY_BYTES:
        await channel.send(reply)
    else:
        await channel.send_bulk(dataclasses.replace(reply, body=b"", bulk=True), reply.body)


async def receive_reply_body(channel: Channel, reply: ControlReply) -> ControlReply:
    """`reply` with its body, read from the bulk transfer that follows it if it announced one."""
    if not reply.bulk:
        return reply
    return dataclasses.replace(reply, body=bytes(await channel.receive_bulk_data(max_size=MAX_REPLY_BYTES)), bulk=False)


def reply_body(request: Request, reply: Any) -> bytes:
    """The CBOR of `request`'s REPLY; the events it carries each encoded once (a client polling `status` or `events`
    gets the same latest events again and again: they were most of the reply's encoding)."""
    if isinstance(request, ListEvents):
        return encode(encoded_events(reply))
    plain = plain_reply(request, reply)
    if isinstance(reply, NodeStatus):
        plain["events"] = encoded_events(reply.events)
    return encode(plain)


def plain_reply(request: Request, reply: Any) -> Any:
    """`reply` to `request` as plain data (maps, lists, strings, numbers): the body of `--json`."""
    return to_plain(type(request).REPLY, reply)


def _connect(paths: Paths) -> socket.socket:
    """A connection to the node of `paths.data_dir`: at its runtime-dir socket, else in the data dir."""
    candidates = dict.fromkeys((paths.control_socket, paths.data_dir_control_socket))
    for path in candidates:
        if not path.exists():
            continue
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(CALL_TIMEOUT)
        try:
            sock.connect(str(_fits(path)))
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()  # a socket left by a node that was killed
        except BaseException:
            sock.close()
            raise
    _fits(paths.control_socket)  # a node could not even have started there: say why
    raise NodeUnavailableError(
        f"no node is running with the data dir {paths.data_dir} (start one with `frost-tui` or `frost-tui --headless`)"
    )


def call_node(paths: Paths, request: Request) -> Any:
    """Send one request to the node that owns `paths.data_dir` and return its typed reply (blocking).

    Raises NodeUnavailableError when no node listens there, and FrostError with the node's
    own title and message when the node refuses.
    """
    sock = _connect(paths)
    try:
        with sock.makefile("rwb") as pipe:
            write_frame(pipe, request_message(request))
            pipe.flush()
            reply = read_frame(pipe)
            if isinstance(reply, ControlReply) and reply.bulk:
                reply = dataclasses.replace(reply, body=bytes(read_bulk_data(pipe, max_size=MAX_REPLY_BYTES)), bulk=False)
    except TimeoutError as error:
        raise NodeUnavailableError(f"the node at {paths.data_dir} did not answer within {CALL_TIMEOUT:.0f} s") from error
    finally:
        sock.close()
    if not isinstance(reply, ControlReply):
        raise ProtocolError(f"the node answered with {type(reply).__name__}, not a control reply")
    return reply_value(request, reply)


def request_message(request: Request) -> ControlRequest:
    return ControlRequest(kind=type(request).__name__, fields=encode(to_plain(type(request), request)))


def reply_value(request: Request, reply: ControlReply) -> Any:
    """The typed REPLY to `request` carried by `reply`, or the node's refusal raised as a FrostError."""
    if not reply.ok:
        raise FrostError(reply.error_message, title=reply.error_title)
    return from_plain(type(request).REPLY, decode_strict(reply.body))
