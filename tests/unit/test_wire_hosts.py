"""The one rule for hosts a peer may be reached at: an IP address or a well-formed host name."""

import pytest

from frost_core.wire.hosts import is_host


@pytest.mark.parametrize("host", ["desk", "desk-1.lan", "desk.lan.", "my_pc", "10.0.0.2", "::1", "fe80::1%eth0",
                                  "a" * 63 + ".lan", ".".join(["a" * 63] * 3 + ["a" * 61])])
def test_ip_addresses_and_host_names_are_hosts(host):
    assert is_host(host)


@pytest.mark.parametrize(
    "host",
    [
        "desk..lan",  # an empty label: idna raised UnicodeError where callers expect OSError
        ".desk",
        "desk.lan..",
        "a" * 64 + ".lan",  # a label over 63 characters
        ".".join(["a" * 63] * 3 + ["a" * 62]),  # 254 characters
        "-desk",
        "desk-",
        "de sk",
        "bürö",
        "desk\n",
        "",
    ],
)
def test_malformed_names_are_not_hosts(host):
    assert not is_host(host)
