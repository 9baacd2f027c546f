"""Which hosts a peer may be reached at: an IP address or a well-formed host name.

Resolving a name with an empty or overlong label (`desk..lan`, `.desk`, 64 letters) fails in
Python's idna codec with UnicodeError, which no network code expects. The owner's
`node.advertise_host` and every host a peer gossips go through this one rule before anything
resolves them.
"""

import ipaddress
import re
from collections.abc import Iterator
from contextlib import contextmanager

MAX_HOST_NAME = 253
"""Characters in a host name written with dots (RFC 1035's 255 octets on the wire, less framing)."""

_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
"""RFC 1123: 1 to 63 ASCII letters, digits and hyphens, with no hyphen at either end; and underscores, which
desks' own names have (Windows allows them, and resolvers pass them on)."""


def is_host(text: str) -> bool:
    """True for an IP address (v4 or v6) or a host name made of valid labels, written with or without the
    root's trailing dot."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        name = text[:-1] if text.endswith(".") else text
        return len(name) <= MAX_HOST_NAME and all(_LABEL.fullmatch(label) for label in name.split("."))
    return True


@contextmanager
def unresolvable_as_os_error(address: tuple[str, int]) -> Iterator[None]:
    """Python's idna codec refuses a malformed name (`desk..lan`) with UnicodeError, a ValueError.

    Callers handle an unreachable peer's OSError; a name that slipped past `is_host` (a seed, a UI's
    target) must fail that one connection the same way, not escape and stop the task that made it.
    """
    try:
        yield
    except UnicodeError as error:
        raise OSError(f"{address[0]!r} cannot be resolved: {error}") from error
