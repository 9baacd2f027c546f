"""How long a suspicion lasts before the member is declared dead: a pure function of cluster size."""

from __future__ import annotations

import math

from frost_core.membership.config import MembershipConfig


def suspicion_timeout(cluster_size: int, confirmations: int, config: MembershipConfig) -> float:
    """Seconds from the first suspicion to a declaration of death.

    The floor grows with log10 of the cluster size because news takes O(log N) rounds to reach
    everyone, the suspect included, which needs that long to refute; it never drops below
    `suspicion_min`, the longest stall of its own loop a node is expected to survive. Lifeguard starts at a
    multiple of that floor and shrinks it logarithmically as independent suspicions arrive, so
    one slow observer alone cannot kill a member quickly. With fewer than two other members no
    confirmation is possible and the floor applies.
    """
    scaled = config.suspicion_multiplier * math.log10(max(cluster_size, 1)) * config.probe_interval
    floor = max(config.suspicion_min, scaled)
    ceiling = floor * config.suspicion_max_multiplier
    expected = min(config.expected_confirmations, cluster_size - 2)
    if expected <= 0 or confirmations >= expected:
        return floor
    fraction = math.log(max(confirmations, 0) + 1) / math.log(expected + 1)
    return max(floor, ceiling - (ceiling - floor) * fraction)


def death_settle(peers: int, config: MembershipConfig) -> float:
    """Seconds after a member's death until this node can tell whether it is the one cut off.

    Cut off, this node finds every peer silent, but one at a time: each is suspected at its first
    probe after the cut, and that probe comes within two rounds over the `peers` it probes (the rest
    of the round under way, then the next, shuffled anew), each probe interval stretched up to
    (max_awareness + 1)× by the awareness its own failed probes raise. The first of them was declared
    dead no sooner than the confirmed suspicion timeout after its suspicion. So this long after that
    death, a peer still alive answered a probe since the cut: the death is evidence against the dead
    member, not against this node. Never less than one stretched probe interval.
    """
    stretched = config.probe_interval * (config.max_awareness + 1)
    rounds = 2 * max(peers, 1) * stretched
    confirmed = suspicion_timeout(peers + 1, config.expected_confirmations, config)
    return max(stretched, rounds - confirmed)
