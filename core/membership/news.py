"""How long a change stays news, and how seldom whole tables are compared: pure functions of cluster size."""

from __future__ import annotations

import math

_UNSCALED_SIZE = 32
"""memberlist's pushPullScaleThreshold: up to this many members the full exchange keeps its base interval."""


def news_rounds(size: int, fanout: int) -> int:
    """Gossip rounds a changed record is offered in every exchange after it reached us.

    Push-pull with `fanout` peers a round reaches N members in about log_(2k+1) N rounds; two
    more cover loss and the unlucky last few (compare memberlist's retransmit limit,
    4 ceil(log10(N + 1)) sends of each broadcast). 4 rounds at N = 10, 7 at 1,000, 8 at 5,000 (k = 2).
    """
    return 2 + math.ceil(math.log(max(size, 2)) / math.log(2 * fanout + 1))


def full_sync_interval(size: int, base: float) -> float:
    """Seconds between a node's exchanges of whole-table digests: memberlist's pushPullScale.

    The whole table travels only to repair what news missed (a long stall, lost pushes), so
    its cost per node stays about flat as N grows: the interval grows with log2 N above 32
    members (6× at N = 1,000, 9× at 5,000).
    """
    if size <= _UNSCALED_SIZE:
        return base
    return base * (math.ceil(math.log2(size) - math.log2(_UNSCALED_SIZE)) + 1)
