"""Membership: the resource vector of every known node, spread by gossip and kept honest by failure detection."""

from frost_core.membership.config import MembershipConfig
from frost_core.membership.memory_transport import MemoryNetwork, MemoryTransport, open_memory_network
from frost_core.membership.records import Address, MemberState, NodeRecord, ResourceFigures
from frost_core.membership.service import MemberEvent, Membership
from frost_core.membership.transport_protocol import Transport

__all__ = [
    "Address",
    "MemberEvent",
    "MemberState",
    "Membership",
    "MembershipConfig",
    "MemoryNetwork",
    "MemoryTransport",
    "NodeRecord",
    "ResourceFigures",
    "Transport",
    "open_memory_network",
]
