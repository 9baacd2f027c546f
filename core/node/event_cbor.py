"""Each event's CBOR made once: every status call and every snapshot pushed to a UI carries the latest events again."""

from __future__ import annotations

import weakref
from collections.abc import Iterable

from frost_core.api.snapshot import EventView
from frost_core.wire.codec import Encoded, encode
from frost_core.wire.messages import to_plain

_ENCODED: weakref.WeakKeyDictionary[EventView, Encoded] = weakref.WeakKeyDictionary()
"""An event's CBOR for as long as the event log (or a snapshot) holds the event."""


def encoded_events(events: Iterable[EventView]) -> list[Encoded]:
    """`events` as CBOR items for `encode` to splice: the plain form's bytes, made at an event's first call."""
    items = []
    for event in events:
        item = _ENCODED.get(event)
        if item is None:
            item = _ENCODED[event] = Encoded(encode(to_plain(EventView, event)))
        items.append(item)
    return items
