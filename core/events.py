"""The node's event log: a bounded history for the UI's Events screen, mirrored to the log file."""

from __future__ import annotations

import collections
import logging
import time

from frost_core.api.snapshot import EventView

log = logging.getLogger("frost.events")

_LEVELS = {"info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class EventLog:
    """Keeps the newest `capacity` events; older ones live on only in the rotating log file."""

    def __init__(self, capacity: int = 1000) -> None:
        self._events: collections.deque[EventView] = collections.deque(maxlen=capacity)
        self.version = 0

    def add(self, kind: str, message: str, *, severity: str = "info", title: str = "") -> EventView:
        event = EventView(at=time.time(), kind=kind, message=message, severity=severity, title=title)
        self._events.append(event)
        self.version += 1
        log.log(_LEVELS[severity], "%s: %s", kind, message)
        return event

    def error(self, error: BaseException, *, kind: str = "error") -> EventView:
        """Record a failure the owner should see, with the error's own title when it has one."""
        title = getattr(error, "title", type(error).__name__)
        message = getattr(error, "message", str(error))
        return self.add(kind, message, severity="error", title=title)

    def recent(self) -> tuple[EventView, ...]:
        return tuple(self._events)
