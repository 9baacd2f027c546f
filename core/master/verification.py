"""Results checked by a second host: which units to check, and what the copies of a checked unit decide.

A unit's result is bit-identical wherever it runs (BOINC's homogeneous redundancy holds by
construction here), so a master checks a host cheaply: a chosen fraction of units run on two
different hosts and their results' SHA-256 must agree. When they differ a third host runs it and
the majority wins; the host outvoted returned a wrong result (bad RAM, an overclock, a tampered
node) and is quarantined by this master. Pure functions; randomness comes in as an argument.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

AGREEING = 2
"""Copies that must agree for a checked unit's result to be taken."""
MAX_COPIES = 5
"""A checked unit with no majority after this many copies fails (something other than a host is wrong)."""


@dataclass(frozen=True)
class Decision:
    agreed: str | None                 # the SHA-256 the majority returned, once there is one
    wrong: tuple[str, ...] = ()        # hosts whose result the majority outvoted
    exhausted: bool = False            # no majority after MAX_COPIES copies


def choose_checked(count: int, fraction: float, rng: random.Random) -> frozenset[int]:
    """The units of a `count`-unit assignment to check: each with probability `fraction`, at random."""
    if fraction <= 0:
        return frozenset()
    if fraction >= 1:
        return frozenset(range(count))
    return frozenset(i for i in range(count) if rng.random() < fraction)


def decide(copies: tuple[tuple[str, str], ...]) -> Decision:
    """What the (host, SHA-256) copies so far decide: the result once AGREEING copies match, and the hosts
    that returned another; none yet while fewer agree (another host must run it)."""
    if not copies:
        return Decision(agreed=None)
    sha, votes = Counter(sha for _, sha in copies).most_common(1)[0]
    if votes >= AGREEING:
        return Decision(agreed=sha, wrong=tuple(host for host, other in copies if other != sha))
    return Decision(agreed=None, exhausted=len(copies) >= MAX_COPIES)


def summary(verify: float, units: int, verified: int) -> str:
    """How an assignment's results were checked, for its done event and its summary line."""
    if verify <= 0:
        return "not verified"
    if verify >= 1:
        return f"{verified} of {units} units verified by a second host"
    # "0 of 16 verified" alone reads like a failed check; at 2 % of 16 units it is what was asked.
    return f"{verified} of {units} units verified by a second host ({verify * 100:.3g} % asked)"
