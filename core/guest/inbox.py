"""A gang member's inbox as it crosses the guest pipe: canonical CBOR out, a strict decoder in."""

from __future__ import annotations

from frost_core.api.errors import PluginError, ProtocolError
from frost_core.plugin.gang import Inbox
from frost_core.plugin.limits import MAX_OUTBOX_BYTES
from frost_core.plugin.plain import decode_plain, encode_plain


def inbox_limit(size: int) -> int:
    """The most bytes an inbox of a gang of `size` may take: every member sent its largest outbox to one rank."""
    return size * MAX_OUTBOX_BYTES


def encode_inbox(inbox: Inbox, size: int) -> bytes:
    """The inbox as plain CBOR, senders in ascending order; ProtocolError if it is not one of a gang of `size`."""
    if not isinstance(inbox, dict) or any(not _is_rank(k, size) or not isinstance(v, list) for k, v in inbox.items()):
        raise ProtocolError(f"an inbox must map sender ranks below {size} to lists of messages")
    try:
        return encode_plain({sender: inbox[sender] for sender in sorted(inbox)}, "an inbox", inbox_limit(size))
    except PluginError as error:
        raise ProtocolError(error.message) from error


def decode_inbox(data: bytes, size: int) -> Inbox:
    """Decode `encode_inbox` data; ProtocolError on anything else, since only the node writes an inbox."""
    try:
        plain = decode_plain(data, "an inbox")
    except PluginError as error:
        raise ProtocolError(error.message) from error
    if not isinstance(plain, dict) or any(not _is_rank(k, size) or not isinstance(v, list) for k, v in plain.items()):
        raise ProtocolError(f"an inbox must map sender ranks below {size} to lists of messages")
    return {sender: plain[sender] for sender in sorted(plain)}


def _is_rank(value: object, size: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < size
