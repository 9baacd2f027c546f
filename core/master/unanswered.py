"""Peers that let the master's last call to them run out, and until when it does not call them again.

A peer can be alive in the membership (it answers its neighbours' probes) and still out of this
master's reach: a firewall that drops one direction, a route only some peers have, a process that
answers pings but whose node is wedged. The failure detector never declares it dead. Every placement
round that offered it units, or asked it for a replica it holds, then waited out the call's whole
timeout (3 s), and with it every other placement, round after round. So a call that runs out rests
the peer: it is left out of the rounds for a while, longer after each call that runs out again (as
BOINC's clients back off from a project's scheduler), and taken back at once by any answer.
"""

from __future__ import annotations

from collections.abc import Mapping

REST_FIRST = 5.0
"""Seconds a peer is left out after its first call that ran out: the next round or two."""
REST_LONGEST = 60.0
"""The longest rest: a peer that came back is asked again within a minute."""


def rest_after(misses: int) -> float:
    """Seconds to leave a peer out after `misses` calls in a row that ran out (one or more)."""
    return min(REST_FIRST * 2.0 ** (misses - 1), REST_LONGEST)


class Unanswered:
    """The peers resting now, by the master's clock; each a call that runs out at the end of its rest tries again."""

    def __init__(self) -> None:
        self._misses: dict[str, int] = {}      # peer -> its calls in a row that ran out
        self._until: dict[str, float] = {}     # peer -> when its rest ends

    def missed(self, peer: str, now: float) -> float | None:
        """`peer` let a call run out at `now`: it rests; returns for how long. None if it rests already: no call
        starts during a rest, so this one was on its way together with the one that began it (a round asks a
        holder for twenty units at once, and they run out together) and is not counted again."""
        if self.rests(peer, now):
            return None
        misses = self._misses.get(peer, 0) + 1
        self._misses[peer] = misses
        rest = rest_after(misses)
        self._until[peer] = now + rest
        return rest

    def answered(self, peer: str) -> None:
        """`peer` answered a call: it is asked as any other again."""
        self._misses.pop(peer, None)
        self._until.pop(peer, None)

    def rests(self, peer: str, now: float) -> bool:
        """Whether `peer` is left out at `now`."""
        return self._until.get(peer, -1.0) > now

    def resting(self, now: float) -> Mapping[str, float]:
        """Peer -> when its rest ends, for those resting at `now`."""
        return {peer: until for peer, until in self._until.items() if until > now}

    def clear(self) -> None:
        """Every peer is asked again: the calls ran out on this side (the master was cut off, or stopped)."""
        self._misses.clear()
        self._until.clear()
