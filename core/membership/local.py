"""What gossip, probing and discovery use of the service that runs them, so none of them imports it."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Protocol

import trio

from frost_core.api.errors import ProtocolError
from frost_core.membership.awareness import Awareness
from frost_core.membership.config import MembershipConfig
from frost_core.membership.messages import MemberEntry
from frost_core.membership.records import Address, NodeRecord
from frost_core.membership.table import MemberTable
from frost_core.membership.transport_protocol import Transport
from frost_core.wire.messages import Message


class Spreading(Protocol):
    """The gossip part as probing and discovery call it."""

    async def push(self, records: Sequence[NodeRecord], peers: Sequence[NodeRecord]) -> None: ...

    async def push_pull(self, address: Address) -> bool: ...


class LocalMember(Protocol):
    """This node as its protocol parts see it: identity, settings, the table and the shared plumbing.

    `Membership` is the one implementation; scenario tests drive the whole through it.
    """

    node_id: str
    address: Address
    config: MembershipConfig
    rng: random.Random
    awareness: Awareness
    table: MemberTable

    @property
    def gossip(self) -> Spreading: ...

    @property
    def transport(self) -> Transport: ...

    @property
    def nursery(self) -> trio.Nursery: ...

    def own_entry(self) -> MemberEntry: ...

    async def send(self, address: Address, message: Message) -> None: ...

    def absorb(self, entries: Iterable[MemberEntry]) -> None: ...

    def absorb_one(self, entry: MemberEntry, *, first_hand: bool = False) -> str | None: ...

    def store(self, before: NodeRecord, after: NodeRecord) -> None: ...

    def report_bad_input(self, address: Address, error: ProtocolError) -> None: ...
