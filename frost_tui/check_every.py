"""`submit --check-every`: a gang's check cadence as people write it ("10s", "2m", "50 supersteps", "30s,50steps", "2m,forced", "off")."""

from __future__ import annotations

import re

from frost_core import ConfigError

_SECONDS = {"s": 1, "m": 60, "h": 3600}
_TERM = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|steps?|supersteps?)?$")


def parse_check_every(text: str) -> tuple[float, int, bool]:
    """(seconds, supersteps) between a gang's checks, 0 for a trigger the text leaves off, and whether every
    check is forced; ConfigError otherwise.

    Terms are joined by commas and the first to come due triggers a check; "off" checks never (the gang then
    moves only when a member's host is lost or the owner moves it). A "forced" term makes every check take a
    global checkpoint and restart the gang on the best p, whatever the members answer (BSPlib's baseline).
    """
    seconds, supersteps, forced = 0.0, 0, False
    if text.strip().lower() == "off":
        return seconds, supersteps, forced
    for term in text.lower().split(","):
        if term.strip() == "forced":
            forced = True
            continue
        match = _TERM.match(term.strip())
        if match is None or float(match.group(1)) <= 0:
            raise ConfigError(f"--check-every {text!r}: expected a time such as 10s, 2m or 1h, a count such as "
                              "50 supersteps, both (30s,50steps) or off", title="Bad check cadence")
        number, unit = match.group(1), match.group(2) or "s"
        if unit in _SECONDS:
            seconds = float(number) * _SECONDS[unit]
        elif not number.isdigit():
            raise ConfigError(f"--check-every {text!r}: supersteps are counted in whole numbers",
                              title="Bad check cadence")
        else:
            supersteps = int(number)
    if forced and not (seconds or supersteps):
        raise ConfigError(f"--check-every {text!r}: forced checks need a time or a count (2m,forced)",
                          title="Bad check cadence")
    return seconds, supersteps, forced
