"""A private dbus-daemon and small stand-in services (Mutter, ScreenSaver, logind) for the tests.

Each bus is a real `dbus-daemon` (Debian package `dbus`) on a socket in the test's directory;
each service is a jeepney connection in a thread of the test process, answering the few
methods the node calls from figures the test sets, and emitting the signals it asks for.
"""

from __future__ import annotations

import os
import queue
import select
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from jeepney import DBusAddress, MessageType, new_error, new_method_return, new_signal
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection
from jeepney.low_level import HeaderFields

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
    <allow user="*"/>
  </policy>
</busconfig>
"""

# Body in; (signature, body) out, or (signature, body, fd) to close an fd once sent, or an error name.
Handler = Callable[[tuple], "tuple | str"]


class PrivateBus:
    """A dbus-daemon of our own; `address` is what DBUS_*_BUS_ADDRESS should say."""

    def __init__(self, directory: Path, name: str) -> None:
        if shutil.which("dbus-daemon") is None:
            pytest.fail("dbus-daemon is not installed (Debian package dbus; .ci/run installs it)")
        directory.mkdir(parents=True, exist_ok=True)
        socket = directory / f"{name}.sock"
        config = directory / f"{name}.conf"
        config.write_text(BUS_CONFIG.format(socket=socket))
        self.address = f"unix:path={socket}"
        self.process = subprocess.Popen(["dbus-daemon", f"--config-file={config}", "--nofork", "--print-address=1"],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.process.stdout.readline()      # printed once the bus listens

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        self.process.stdout.close()


class FakeService(threading.Thread):
    """Owns `name` on the bus and answers `handlers[(path, interface, member)]` until `stop()`."""

    def __init__(self, address: str, name: str, handlers: dict[tuple[str, str, str], Handler]) -> None:
        super().__init__(daemon=True)
        self.address, self.name, self.handlers = address, name, handlers
        self.calls: list[tuple[str, str, str]] = []
        self._outgoing: queue.Queue = queue.Queue()
        self._halt = threading.Event()
        self._ready = threading.Event()

    def run(self) -> None:
        with open_dbus_connection(self.address, enable_fds=True) as connection:
            connection.send_and_get_reply(message_bus.RequestName(self.name), timeout=5)
            self._ready.set()
            while not self._halt.is_set():
                while not self._outgoing.empty():
                    connection.send(self._outgoing.get())
                try:
                    message = connection.receive(timeout=0.05)
                except TimeoutError:
                    continue
                if message.header.message_type is MessageType.method_call:
                    reply, sent_fds = self._answer(message)
                    connection.send(reply)
                    for fd in sent_fds:     # the receiver holds its own copy now
                        os.close(fd)

    def _answer(self, message):
        fields = message.header.fields
        path, interface, member = (str(fields.get(k)) for k in (HeaderFields.path, HeaderFields.interface, HeaderFields.member))
        if interface == "org.freedesktop.DBus.Properties":
            interface, member = message.body[0], f"{member}:{message.body[1] if member == 'Get' else ''}"
        self.calls.append((path, interface, member))
        handler = self.handlers.get((path, interface, member))
        if handler is None:
            return new_error(message, "org.freedesktop.DBus.Error.UnknownMethod", "s", (f"no {member}",)), ()
        result = handler(message.body)
        if isinstance(result, str):     # an error name
            return new_error(message, result, "s", ("refused",)), ()
        signature, body, *sent_fds = result
        return new_method_return(message, signature, body), tuple(sent_fds)

    def start(self) -> FakeService:
        super().start()
        if not self._ready.wait(10):
            raise RuntimeError(f"{self.name} did not get its bus name")
        return self

    def emit(self, path: str, interface: str, member: str, signature: str, body: tuple) -> None:
        self._outgoing.put(new_signal(DBusAddress(path, interface=interface), member, signature, body))

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


def mutter_service(address: str, idle: Callable[[], float]) -> FakeService:
    """GNOME's IdleMonitor answering GetIdletime with `idle()` seconds (in milliseconds, as Mutter does)."""
    return FakeService(address, "org.gnome.Mutter.IdleMonitor", {
        ("/org/gnome/Mutter/IdleMonitor/Core", "org.gnome.Mutter.IdleMonitor", "GetIdletime"):
            lambda body: ("t", (int(idle() * 1000),)),
    }).start()


def screensaver_service(address: str, idle: Callable[[], float]) -> FakeService:
    return FakeService(address, "org.freedesktop.ScreenSaver", {
        ("/org/freedesktop/ScreenSaver", "org.freedesktop.ScreenSaver", "GetSessionIdleTime"):
            lambda body: ("u", (int(idle()),)),
    }).start()


SESSION_PATH = "/org/freedesktop/login1/session/_31"
MANAGER_PATH = "/org/freedesktop/login1"


def logind_service(address: str, idle_since: Callable[[], float | None],
                   extra: dict[tuple[str, str, str], Handler] | None = None) -> FakeService:
    """logind with one session: IdleHint while `idle_since()` (epoch seconds) is not None."""

    def session_properties(body):
        since = idle_since()
        return "a{sv}", ({"IdleHint": ("b", since is not None),
                          "IdleSinceHint": ("t", int((since or 0) * 1e6))},)

    return FakeService(address, "org.freedesktop.login1", {
        (MANAGER_PATH, "org.freedesktop.login1.Manager", "GetSessionByPID"): lambda body: ("o", (SESSION_PATH,)),
        (SESSION_PATH, "org.freedesktop.login1.Session", "GetAll:"): session_properties,
        **(extra or {}),
    }).start()


class Inhibitors:
    """logind's Inhibit as the stand-in hands it out: the caller holds a pipe's write end; closing it releases."""

    def __init__(self) -> None:
        self.taken: list[tuple[tuple, int]] = []    # (arguments, our read end)

    def inhibit(self, body: tuple) -> tuple[str, tuple, int]:
        read_end, write_end = os.pipe()
        self.taken.append((body, read_end))
        return "h", (write_end,), write_end

    def held(self) -> int:
        """How many inhibitors are still held (their write end open somewhere)."""
        return sum(1 for _, read_end in self.taken if not select.select([read_end], [], [], 0)[0])

    def close(self) -> None:
        for _, read_end in self.taken:
            os.close(read_end)

