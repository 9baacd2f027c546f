"""The one rule for hosts a peer may be reached at: an IP address or a well-formed host name."""

import pytest

from frost_core.wire.channel import open_channel
from frost_core.wire.hosts import is_host
from frost_core.wire.security import ClusterKey


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


async def test_a_malformed_name_a_ui_connects_to_fails_as_an_unreachable_host():
    # A `control.hosts` entry is not checked by the rule above: connecting to it must fail as OSError (which the
    # attached UI reports as a target it cannot reach), not as the idna codec's UnicodeError.
    with pytest.raises(OSError, match="'desk..lan' cannot be resolved"):
        await open_channel(("desk..lan", 47631), ClusterKey.generate(), "ui")
