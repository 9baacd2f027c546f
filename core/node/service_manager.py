"""Talking to systemd by hand: sd_notify is one datagram to `$NOTIFY_SOCKET`, no library needed.

A `Type=notify` unit is "started" when the node says READY=1, is restarted when WATCHDOG=1
stops arriving (the node's loop is stuck), and shows STATUS= in `systemctl status`. Outside
systemd every call here does nothing.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

log = logging.getLogger("frost.service")


def notify_address(environ: Mapping[str, str]) -> str | None:
    """The socket address systemd gave us: a path, or an abstract name (`@name` -> `\\0name`)."""
    address = environ.get("NOTIFY_SOCKET", "")
    if not address:
        return None
    return "\0" + address[1:] if address.startswith("@") else address


def notify(*fields: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Send `READY=1`, `STATUS=…` and the like as one datagram; False when not under systemd.

    A failure is logged, never raised: the node runs on even if the manager stopped listening.
    """
    address = notify_address(environ)
    if address is None:
        return False
    message = "\n".join(fields).encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto(message, address)
    except OSError as error:
        log.warning("could not notify the service manager at %s: %s", environ["NOTIFY_SOCKET"], error)
        return False
    return True


def watchdog_interval(environ: Mapping[str, str] = os.environ, *, pid: int | None = None) -> float | None:
    """Seconds between WATCHDOG=1 pings (half of `WatchdogSec`, as sd_watchdog_enabled advises), or None."""
    usec = environ.get("WATCHDOG_USEC", "")
    owner = environ.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if owner and owner != str(os.getpid() if pid is None else pid):
        return None  # meant for another process of the unit
    return int(usec) / 2e6


def logs_to_journal(environ: Mapping[str, str] = os.environ, *, stderr_fd: int = 2) -> bool:
    """True when stderr is the journal stream systemd connected (`$JOURNAL_STREAM` = its device:inode)."""
    stream = environ.get("JOURNAL_STREAM", "")
    device, sep, inode = stream.partition(":")
    if not sep:
        return False
    try:
        status = os.fstat(stderr_fd)
    except OSError:
        return False
    return f"{status.st_dev}:{status.st_ino}" == f"{device}:{inode}"
