"""Every timing and size membership uses, with LAN defaults, in one frozen dataclass."""

from __future__ import annotations

from dataclasses import dataclass, fields

from frost_core.api.errors import ConfigError


@dataclass(frozen=True)
class MembershipConfig:
    """Membership timings. The defaults are for a LAN of desk machines.

    They are chosen together: a node is probed by someone about every `probe_interval`, so a
    crashed node is suspected within a second or so and dead everywhere
    max(`suspicion_min`, `suspicion_multiplier · probe_interval · log10 N`) seconds later
    (10 s up to N = 100). That is just longer than a 10 s stall of a node's event loop (it
    shares a thread with the UI), so a starved node wakes in time to refute.
    """

    gossip_interval: float = 2.0
    """Seconds between push-pull rounds (BSPlib's anti-entropy interval)."""
    full_sync_interval: float = 30.0
    """Seconds between a node's exchanges of whole-table digests with one peer (memberlist's push-pull
    interval), stretched with log N above 32 members; the other exchanges carry only news."""
    fanout: int = 2
    """Random peers each push-pull round and each immediate push reaches (k)."""
    push_threshold: float = 0.05
    """Relative change of the local `available` figure that is pushed at once (FROST: 5 %)."""
    probe_interval: float = 0.25
    """Seconds between probes of one member; stretched by local awareness."""
    probe_timeout: float = 0.1
    """Seconds to wait for a direct ack before asking others; stretched by local awareness."""
    indirect_probes: int = 3
    """Members asked to probe on our behalf when a direct probe times out."""
    suspicion_multiplier: float = 20.0
    """Suspicion lasts this many probe intervals times log10(cluster size), once confirmed."""
    suspicion_min: float = 10.0
    """No suspicion ends sooner: the longest stall of our event loop a node rides out."""
    suspicion_max_multiplier: float = 3.0
    """An unconfirmed suspicion lasts up to this many times longer (Lifeguard)."""
    expected_confirmations: int = 3
    """Independent suspicions that shrink the timeout to its minimum (Lifeguard's K)."""
    max_awareness: int = 8
    """Ceiling of the local health score; timeouts stretch by up to (max_awareness + 1)×."""
    lag_check_interval: float = 0.5
    """How often the node checks its own event loop for stalls (it shares a thread with the UI)."""
    lag_tolerance: float = 0.05
    """Sleep overshoot in seconds that counts as our loop being starved."""
    exchange_timeout: float = 2.0
    """Seconds one push-pull exchange may take."""
    max_entries_per_exchange: int = 256
    """Records per push-pull message; a bigger difference heals over the next rounds."""
    announce_interval: float = 30.0
    """Seconds between discovery broadcasts (the first goes out at start)."""
    reply_delay_max: float = 1.0
    """A node answering an announcement waits a random time in [0, this] (FROST fig. 5.1)."""
    seed_retry_interval: float = 1.0
    """First wait between attempts to join through the seeds and the members we knew, while we know
    no live one; it doubles after each attempt nobody answered, up to `rejoin_max`."""
    rejoin_max: float = 3.0
    """Longest wait between those attempts: a healed partition re-forms within about this long."""
    dead_retention: float = 3600.0
    """Seconds a dead or departed member stays in the table (so old rumours cannot revive it)."""

    @classmethod
    def from_config(cls, config) -> MembershipConfig:
        """The timings the `gossip.*` options set; the rest keep their defaults."""
        return cls(
            gossip_interval=config.get("gossip.interval"), fanout=config.get("gossip.fanout"),
            probe_interval=config.get("gossip.probe_interval"), probe_timeout=config.get("gossip.probe_timeout"),
            suspicion_multiplier=config.get("gossip.suspicion_multiplier"),
            suspicion_min=config.get("gossip.suspicion_min"), announce_interval=config.get("gossip.announce_interval"),
        )

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if not value > 0:
                raise ConfigError(f"membership {field.name} must be positive, got {value!r}")
        if self.probe_timeout >= self.probe_interval:
            raise ConfigError("membership probe_timeout must be shorter than probe_interval")
        if not 0 < self.push_threshold < 1:
            raise ConfigError("membership push_threshold must be a fraction between 0 and 1")
        if self.suspicion_max_multiplier < 1:
            raise ConfigError("membership suspicion_max_multiplier must be at least 1")
