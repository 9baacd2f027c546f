"""A bus that cannot be reached is named in words, never as a Python exception's class name."""

import pytest
import trio
from jeepney import AuthenticationError
from jeepney.io import RouterClosed

from frost_core.measure.buses import UNREACHABLE, why_unreachable


@pytest.mark.parametrize(("error", "words"), [
    (KeyError("DBUS_SESSION_BUS_ADDRESS"), "no session bus: DBUS_SESSION_BUS_ADDRESS is not set"),
    (FileNotFoundError(2, "No such file", "/run/dbus/system_bus_socket"), "no bus: nothing at /run/dbus/system_bus_socket"),
    (ConnectionRefusedError(111, "refused"), "the bus refused the connection"),
    (PermissionError(13, "denied"), "not allowed to open the bus socket"),
    (AuthenticationError(b"REJECTED"), "the bus did not accept this user"),
    (trio.TooSlowError(), "the bus did not answer in time"),
    (EOFError(), "the bus closed the connection"),
    (trio.EndOfChannel("Socket closed at the other end"), "the bus closed the connection"),
    (RouterClosed("D-Bus router closed before reply arrived"), "the bus closed the connection"),
])
def test_each_way_a_bus_fails_has_a_sentence(error, words):
    assert isinstance(error, UNREACHABLE)
    assert why_unreachable(error) == words
