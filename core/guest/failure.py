"""Why a guest child stops: its unit (or gang member) cannot go on, or the node's pipe broke."""

from __future__ import annotations


class GuestFailure(BaseException):
    """The unit cannot go on; `kind` tells the node whose fault it was.

    A BaseException, like the pipe failure below, because it may be raised inside plugin code
    (by `open_input`), and a plugin's `except Exception` must not swallow it.
    """

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


class PipeLost(BaseException):
    """The node's pipe broke while plugin code waited on it (in `open_input`)."""
