"""sd_notify by hand: real datagram sockets (a path and an abstract name), the watchdog and journal checks."""

from __future__ import annotations

import os
import socket
import uuid

import pytest

from frost_core.node import service_manager


@pytest.fixture
def path_socket(tmp_path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify"))
    sock.settimeout(5)
    with sock:
        yield str(tmp_path / "notify"), sock


def test_notify_sends_every_field_as_one_datagram_to_a_path(path_socket):
    address, sock = path_socket
    assert service_manager.notify("READY=1", "STATUS=listening on 127.0.0.1:1", environ={"NOTIFY_SOCKET": address})
    assert sock.recv(4096) == b"READY=1\nSTATUS=listening on 127.0.0.1:1"


def test_notify_reaches_an_abstract_socket_named_with_an_at_sign():
    name = f"frost-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        assert service_manager.notify("STOPPING=1", environ={"NOTIFY_SOCKET": "@" + name})
        assert sock.recv(4096) == b"STOPPING=1"


def test_notify_outside_systemd_does_nothing_and_a_gone_manager_is_not_an_error(tmp_path):
    assert not service_manager.notify("READY=1", environ={})
    assert not service_manager.notify("READY=1", environ={"NOTIFY_SOCKET": str(tmp_path / "nobody-listens")})


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, None),
    ({"WATCHDOG_USEC": "60000000"}, 30.0),                          # half of WatchdogSec=60
    ({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "42"}, 30.0),   # meant for us
    ({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "43"}, None),   # meant for another process
    ({"WATCHDOG_USEC": "0"}, None),
    ({"WATCHDOG_USEC": "soon"}, None),
])
def test_watchdog_interval(environ, expected):
    assert service_manager.watchdog_interval(environ, pid=42) == expected


def test_journal_is_recognised_only_when_stderr_is_that_stream(tmp_path):
    with open(tmp_path / "stream", "w") as stream:
        status = os.fstat(stream.fileno())
        environ = {"JOURNAL_STREAM": f"{status.st_dev}:{status.st_ino}"}
        assert service_manager.logs_to_journal(environ, stderr_fd=stream.fileno())
        assert not service_manager.logs_to_journal({"JOURNAL_STREAM": "1:2"}, stderr_fd=stream.fileno())
        assert not service_manager.logs_to_journal({}, stderr_fd=stream.fileno())
