"""Whether the owner is at the desk: input idle time from the desktop session, terminals only as a last resort.

Keyboard and mouse reads through evdev do not move `/dev/input` access times, so typing in a
browser or an editor window never shows there (BOINC#4627, #5226); the desktop session knows.
Sources are tried in order, GNOME first because Mutter's figure is exact to the millisecond,
logind's hint only flips after the desktop's own idle delay. Each read is blocking D-Bus with a
short timeout; the node runs it in a worker thread (`measure.desk.DeskWatch`), never on its loop.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from jeepney import DBusAddress, DBusErrorResponse, Properties, new_method_call
from jeepney.io.blocking import open_dbus_connection
from jeepney.wrappers import unwrap_msg

from frost_core.measure.buses import UNREACHABLE, why_unreachable
from frost_core.measure.owner_activity import input_idle_seconds

CALL_TIMEOUT = 0.5      # seconds one D-Bus call may take: a hung session bus must not stall the readings
RETRY_AFTER = 30.0      # seconds before a source that failed is tried again (a desktop session may start later)

MUTTER = DBusAddress("/org/gnome/Mutter/IdleMonitor/Core", bus_name="org.gnome.Mutter.IdleMonitor",
                     interface="org.gnome.Mutter.IdleMonitor")
SCREENSAVER = DBusAddress("/org/freedesktop/ScreenSaver", bus_name="org.freedesktop.ScreenSaver",
                          interface="org.freedesktop.ScreenSaver")
LOGIND = DBusAddress("/org/freedesktop/login1", bus_name="org.freedesktop.login1",
                     interface="org.freedesktop.login1.Manager")


class NoPresence(Exception):
    """A source that cannot tell (no bus, no display, nothing to stat); the message says why."""


@dataclass(frozen=True)
class Presence:
    """The latest input idle time and where it came from; `source` None means no source answered."""

    source: str | None
    idle_seconds: float | None
    why_none: str = ""

    def describe(self) -> str:
        if self.source is None:
            return f"no presence source ({self.why_none})" if self.why_none else "not read yet"
        return f"{self.source}: input {self.idle_seconds:.0f} s ago"

    def brief(self) -> str:
        """`describe` in a line a screen's side panel holds: why each source failed is in `status` (five sources'
        reasons filled fifteen lines of the Machine tab on a machine without a desktop)."""
        if self.source is None and self.why_none:
            return "none here: no desktop session, X display or terminal answers (frost-tui status says why)"
        return self.describe()


def _call(bus: str, message) -> tuple:
    """One method call on a fresh connection: nothing to keep open or to close when the node stops."""
    with open_dbus_connection(bus, auth_timeout=CALL_TIMEOUT) as connection:
        return unwrap_msg(connection.send_and_get_reply(message, timeout=CALL_TIMEOUT))


def mutter_idle() -> float:
    """GNOME's IdleMonitor on the session bus: milliseconds since the last input."""
    (milliseconds,) = _call("SESSION", new_method_call(MUTTER, "GetIdletime"))
    return milliseconds / 1000.0


def screensaver_idle() -> float:
    """The freedesktop ScreenSaver interface (KDE, Xfce, ...): seconds the session has been idle."""
    (seconds,) = _call("SESSION", new_method_call(SCREENSAVER, "GetSessionIdleTime"))
    return float(seconds)


def logind_idle(now: float | None = None) -> float:
    """logind's IdleHint/IdleSinceHint of this process's session, or of its user's display session.

    A node started as a user service has no session of its own: its user's graphical
    ("Display") session is the one the owner types in. Not idle means input right now.
    """
    try:
        (path,) = _call("SYSTEM", new_method_call(LOGIND, "GetSessionByPID", "u", (os.getpid(),)))
    except DBusErrorResponse:
        (user,) = _call("SYSTEM", new_method_call(LOGIND, "GetUser", "u", (os.getuid(),)))
        user_address = DBusAddress(user, bus_name=LOGIND.bus_name, interface="org.freedesktop.login1.User")
        ((_, (_, path)),) = _call("SYSTEM", Properties(user_address).get("Display"))
        if path == "/":
            raise NoPresence("logind: no session for this user") from None
    session = DBusAddress(path, bus_name=LOGIND.bus_name, interface="org.freedesktop.login1.Session")
    (properties,) = _call("SYSTEM", Properties(session).get_all())
    if not properties["IdleHint"][1]:
        return 0.0
    now = time.time() if now is None else now
    return max(now - properties["IdleSinceHint"][1] / 1e6, 0.0)


class _XScreenSaverInfo(ctypes.Structure):
    _fields_ = [("window", ctypes.c_ulong), ("state", ctypes.c_int), ("kind", ctypes.c_int),
                ("til_or_since", ctypes.c_ulong), ("idle", ctypes.c_ulong), ("event_mask", ctypes.c_ulong)]


def xscreensaver_idle() -> float:
    """The MIT-SCREEN-SAVER extension of the X server in $DISPLAY (libXss, when installed)."""
    if not os.environ.get("DISPLAY"):
        raise NoPresence("xscreensaver: no DISPLAY")
    x11_name, xss_name = ctypes.util.find_library("X11"), ctypes.util.find_library("Xss")
    if not x11_name or not xss_name:
        raise NoPresence("xscreensaver: libX11 or libXss not installed")
    x11, xss = ctypes.CDLL(x11_name), ctypes.CDLL(xss_name)
    x11.XOpenDisplay.restype = ctypes.c_void_p
    x11.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
    x11.XDefaultRootWindow.restype = ctypes.c_ulong
    x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
    xss.XScreenSaverAllocInfo.restype = ctypes.POINTER(_XScreenSaverInfo)
    xss.XScreenSaverQueryInfo.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.POINTER(_XScreenSaverInfo)]
    display = x11.XOpenDisplay(None)
    if not display:
        raise NoPresence("xscreensaver: cannot open the display")
    info = xss.XScreenSaverAllocInfo()
    try:
        if not xss.XScreenSaverQueryInfo(display, x11.XDefaultRootWindow(display), info):
            raise NoPresence("xscreensaver: the X server lacks MIT-SCREEN-SAVER")
        return info.contents.idle / 1000.0
    finally:
        x11.XFree(info)
        x11.XCloseDisplay(display)


def tty_idle() -> float:
    """Terminal and input-device access times: blind to windows on a desktop, right on a console."""
    idle = input_idle_seconds()
    if idle is None:
        raise NoPresence("tty: no terminal or input device to stat")
    return idle


SOURCES: tuple[tuple[str, Callable[[], float]], ...] = (
    ("GNOME Mutter IdleMonitor", mutter_idle),
    ("freedesktop ScreenSaver", screensaver_idle),
    ("logind IdleHint", logind_idle),
    ("XScreenSaver", xscreensaver_idle),
    ("tty/input access times", tty_idle),
)


class PresenceReader:
    """Tries the sources in order and keeps the first that answers; a failed one rests `RETRY_AFTER` s."""

    def __init__(self, sources: tuple[tuple[str, Callable[[], float]], ...] = SOURCES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.sources = sources
        self.clock = clock
        self._failed: dict[str, tuple[float, str]] = {}    # source -> (when it failed, why)
        self.last = Presence(None, None)

    def read_blocking(self) -> Presence:
        problems = []
        for name, read in self.sources:
            failed = self._failed.get(name)
            if failed is not None and self.clock() - failed[0] < RETRY_AFTER:
                problems.append(failed[1])
                continue
            try:
                idle = read()
            except NoPresence as error:
                why = str(error)
            except UNREACHABLE as error:
                why = f"{name}: {why_unreachable(error)}"
            else:
                self._failed.pop(name, None)
                self.last = Presence(name, idle)
                return self.last
            self._failed[name] = (self.clock(), why)
            problems.append(why)
        self.last = Presence(None, None, "; ".join(problems))
        return self.last
