"""Attaching from another machine: a TCP listener whose channels are keyed by this node's owner token.

The handshake and encryption are the peers' own (`wire.channel`), keyed by the owner token
instead of the cluster key, so a peer, or a guest that stole the cluster key, fails the
handshake and gets nothing. Every refusal is logged and shown in Events (once per source and
RefusalLog interval, so a scan cannot flood them). Only attach requests are served here.
"""

from __future__ import annotations

import logging
from functools import partial

import trio

from frost_core.api.errors import AuthenticationError, ProtocolError
from frost_core.node.attach_protocol import AttachRequest
from frost_core.node.attach_service import Attachable, serve_attached
from frost_core.node.control import Handler
from frost_core.wire.channel import Address, accept_channel
from frost_core.wire.security import ClusterKey, RefusalLog

log = logging.getLogger("frost.remote")

HANDSHAKE_TIMEOUT = 10.0
REFUSAL_LOG_INTERVAL = 5.0
"""Seconds a source's refusals stay muted after one is logged: a retrying client is a line every few seconds."""


async def serve_remote_control(
    address: Address, token: ClusterKey, node_id: str, node: Attachable, handler: Handler, *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve attached UIs from other machines on `address` until cancelled."""
    listeners = await trio.open_tcp_listeners(address[1], host=address[0])
    refusals = RefusalLog(log, interval=REFUSAL_LOG_INTERVAL)
    task_status.started()
    await trio.serve_listeners(partial(_serve_one, token=token, node_id=node_id, node=node, handler=handler,
                                       refusals=refusals), listeners)


async def _serve_one(stream: trio.SocketStream, *, token: ClusterKey, node_id: str, node: Attachable,
                     handler: Handler, refusals: RefusalLog) -> None:
    try:
        source = stream.socket.getpeername()[0]
    except OSError:  # it left before it was looked at (a port scan's connect, a UI that gave up)
        await trio.aclose_forcefully(stream)
        return
    try:
        with trio.fail_after(HANDSHAKE_TIMEOUT):
            channel = await accept_channel(stream, token, node_id)
            request = await channel.receive()
        if not isinstance(request, AttachRequest):
            raise ProtocolError(f"only attach requests are served here, not {type(request).__name__}")
        await serve_attached(channel, request, node, handler, client=f"a UI at {source}")
    except AuthenticationError:
        if refusals.refuse(source, "it does not hold this node's owner token"):
            node.refuse(f"a UI at {source} was refused: it does not hold this node's owner token")
    except (ProtocolError, trio.TooSlowError, trio.EndOfChannel) as error:
        if refusals.refuse(source, str(error)):
            node.refuse(f"a UI at {source} was dropped: {error}")
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    except Exception:  # a bug behind one UI's connection must not take the node and its guests down with it
        log.exception("serving a UI at %s failed; its connection is dropped", source)
    finally:
        await trio.aclose_forcefully(stream)
