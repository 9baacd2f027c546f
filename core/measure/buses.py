"""Why a D-Bus bus could not be used, said in words an owner reads in `status` and the Machine tab.

jeepney reports a missing bus as whatever failed first: a `KeyError` for an unset
`DBUS_SESSION_BUS_ADDRESS`, a `FileNotFoundError` for a system bus socket that is not there.
Those names mean nothing at a desk; the sentences below do.
"""

from __future__ import annotations

import trio
from jeepney import AuthenticationError, DBusErrorResponse
from jeepney.io import RouterClosed

# What a bus call raises when the bus, or the service on it, is not there to answer. A trio router
# whose bus daemon goes away ends its receiver with `EndOfChannel` and fails waiting calls with
# `RouterClosed`.
UNREACHABLE = (OSError, EOFError, DBusErrorResponse, AuthenticationError, KeyError, ValueError, TypeError,
               trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError, trio.EndOfChannel,
               RouterClosed)


def why_unreachable(error: BaseException) -> str:
    """One of `UNREACHABLE` as a short reason; a D-Bus error keeps its own name, which says it exactly."""
    if isinstance(error, DBusErrorResponse):
        return error.name
    if isinstance(error, KeyError):
        return "no session bus: DBUS_SESSION_BUS_ADDRESS is not set"
    if isinstance(error, FileNotFoundError):
        return f"no bus: nothing at {error.filename}" if error.filename else "no bus: its socket does not exist"
    if isinstance(error, ConnectionRefusedError):
        return "the bus refused the connection"
    if isinstance(error, PermissionError):
        return "not allowed to open the bus socket"
    if isinstance(error, AuthenticationError):
        return "the bus did not accept this user"
    if isinstance(error, (TimeoutError, trio.TooSlowError)):
        return "the bus did not answer in time"
    if isinstance(error, (EOFError, trio.BrokenResourceError, trio.ClosedResourceError, trio.EndOfChannel,
                          RouterClosed)):
        return "the bus closed the connection"
    return f"{type(error).__name__}: {error}"
