"""Presence from a desktop session: each D-Bus source drives idle -> active -> idle on a private bus."""

import ctypes
import ctypes.util
import os
import shutil
import subprocess
import time

import pytest

from frost_core.measure import presence
from frost_core.measure.presence import PresenceReader
from frost_core.wire.security import ClusterKey
from tests.nodes import start_node
from tests.process.dbus import (
    MANAGER_PATH, SESSION_PATH, logind_service, mutter_service, screensaver_service,
)
from tests.waiting import wait_for


def _no_tty():
    raise presence.NoPresence("tty: not in this test")


# The D-Bus sources as the node tries them, without the last-resort tty (the test machine's own terminals).
DBUS_ONLY = tuple((name, read) for name, read in presence.SOURCES if read is not presence.tty_idle) + (
    ("tty/input access times", _no_tty),)


def _drive(reader: PresenceReader, idle: list[float], source: str) -> None:
    for seconds in (600.0, 0.0, 900.0):     # idle -> active -> idle
        idle[0] = seconds
        reading = reader.read_blocking()
        assert reading.source == source
        assert reading.idle_seconds == pytest.approx(seconds, abs=1.5)


def test_mutter_idle_monitor_is_read_first(buses, started):
    session, system = buses
    idle = [0.0]
    started(mutter_service(session.address, lambda: idle[0]))
    started(screensaver_service(session.address, lambda: 1.0))
    started(logind_service(system.address, lambda: None))
    _drive(PresenceReader(DBUS_ONLY), idle, "GNOME Mutter IdleMonitor")


def test_freedesktop_screensaver_answers_without_gnome(buses, started):
    session, system = buses
    idle = [0.0]
    started(screensaver_service(session.address, lambda: idle[0]))
    started(logind_service(system.address, lambda: None))
    _drive(PresenceReader(DBUS_ONLY), idle, "freedesktop ScreenSaver")


def test_logind_idle_hint_of_the_session_on_the_system_bus(buses, started):
    _, system = buses
    idle = [0.0]
    started(logind_service(system.address, lambda: time.time() - idle[0] if idle[0] else None))
    _drive(PresenceReader(DBUS_ONLY), idle, "logind IdleHint")


def test_a_session_that_appears_later_is_picked_up_and_one_that_goes_is_left(buses):
    session, _ = buses
    now = [0.0]
    reader = PresenceReader(DBUS_ONLY, clock=lambda: now[0])
    assert reader.read_blocking().source is None
    service = screensaver_service(session.address, lambda: 5.0)
    assert reader.read_blocking().source is None, "a failed source rests before it is tried again"
    now[0] += presence.RETRY_AFTER
    assert reader.read_blocking().source == "freedesktop ScreenSaver"
    service.stop()
    assert reader.read_blocking().source is None


def test_without_any_bus_there_is_no_presence_source_and_it_says_why(monkeypatch, tmp_path):
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={tmp_path}/nothing")
    monkeypatch.delenv("DISPLAY", raising=False)
    reading = PresenceReader(DBUS_ONLY).read_blocking()
    assert reading.source is None and reading.idle_seconds is None
    assert reading.describe().startswith("no presence source (")
    assert "xscreensaver: no DISPLAY" in reading.describe()
    assert "no session bus: DBUS_SESSION_BUS_ADDRESS is not set" in reading.describe()
    assert "logind IdleHint: no bus: its socket does not exist" in reading.describe()
    assert "KeyError" not in reading.describe() and "FileNotFoundError" not in reading.describe()
    assert reading.brief() == "none here: no desktop session, X display or terminal answers (frost-tui status says why)"


def test_logind_finds_the_users_display_session_when_the_node_has_none_of_its_own(buses, started):
    """A node run as a user service is in no session: the user's graphical one is where the owner types."""
    _, system = buses
    user = "/org/freedesktop/login1/user/_1000"
    started(logind_service(system.address, lambda: time.time() - 300, extra={
        (MANAGER_PATH, "org.freedesktop.login1.Manager", "GetSessionByPID"):
            lambda body: "org.freedesktop.login1.NoSessionForPID",
        (MANAGER_PATH, "org.freedesktop.login1.Manager", "GetUser"): lambda body: ("o", (user,)),
        (user, "org.freedesktop.login1.User", "Get:Display"): lambda body: ("v", (("(so)", ("31", SESSION_PATH)),)),
    }))
    reading = PresenceReader(DBUS_ONLY).read_blocking()
    assert reading.source == "logind IdleHint" and reading.idle_seconds == pytest.approx(300, abs=2)


def test_a_live_node_shows_the_sessions_idle_time_in_status_as_it_changes(buses, started, tmp_path):
    session, _ = buses
    idle = [600.0]
    started(mutter_service(session.address, lambda: idle[0]))
    key = tmp_path / "cluster.key"
    ClusterKey.generate().save(key)
    node = start_node(tmp_path / "node", key_file=key)     # the default configuration; the buses come from the env
    try:
        for seconds in (600, 0, 900):                       # idle -> active -> idle
            idle[0] = float(seconds)
            wait_for(lambda: node.call("status")["hosting"]["presence"]
                     == f"GNOME Mutter IdleMonitor: input {seconds} s ago", timeout=15,
                     what=f"status to show input {seconds} s ago")
    finally:
        node.stop()


@pytest.fixture
def x_display(monkeypatch):
    """A private X server (Xvfb, Debian package xvfb) in $DISPLAY; stopped after the test."""
    if shutil.which("Xvfb") is None:
        pytest.fail("Xvfb is not installed (Debian package xvfb; .ci/run installs it)")
    read_end, write_end = os.pipe()
    # -noreset: an X server with no client left starts afresh, idle time included; on a desktop the
    # window manager is always connected, here each reading would be the last client.
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write_end), "-nolisten", "tcp", "-noreset"],
                              pass_fds=(write_end,), stderr=subprocess.DEVNULL)
    os.close(write_end)
    with os.fdopen(read_end) as announced:
        display = f":{announced.readline().strip()}"
    monkeypatch.setenv("DISPLAY", display)
    yield display
    server.terminate()
    server.wait(timeout=10)


def move_the_mouse(display: str) -> None:
    """Input as a user's would reach the X server: a relative pointer motion through XTEST."""
    x11 = ctypes.CDLL(ctypes.util.find_library("X11"))
    xtst = ctypes.CDLL(ctypes.util.find_library("Xtst"))
    x11.XOpenDisplay.restype = ctypes.c_void_p
    x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
    x11.XFlush.argtypes = x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
    xtst.XTestFakeRelativeMotionEvent.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_ulong]
    connection = x11.XOpenDisplay(display.encode())
    xtst.XTestFakeRelativeMotionEvent(connection, 5, 5, 0)
    x11.XFlush(connection)
    x11.XCloseDisplay(connection)


def test_xscreensaver_on_x11_when_no_session_bus_answers(monkeypatch, tmp_path, x_display):
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={tmp_path}/nothing")
    reader = PresenceReader(DBUS_ONLY)
    wait_for(lambda: reader.read_blocking().idle_seconds >= 1.0, timeout=10, what="the X server idle a second")
    assert reader.last.source == "XScreenSaver"                     # idle ...
    move_the_mouse(x_display)
    assert reader.read_blocking().idle_seconds < 0.5                # ... active ...
    wait_for(lambda: reader.read_blocking().idle_seconds >= 1.0, timeout=10, what="idle again")
