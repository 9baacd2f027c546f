"""The local resource table and the sans-IO half of push-pull: digests, deltas and wants."""

from __future__ import annotations

import hashlib
import random
from dataclasses import replace
from collections.abc import Iterable

from frost_core.api.errors import ProtocolError
from frost_core.membership.records import MAX_COUNTER, MAX_SUSPECTORS, MemberState, NodeRecord, merge_records

KEY_SIZE = 6
"""Bytes of a digest key: two of 1000 nodes collide with odds of about 2e-9."""
MAX_DIGEST_ITEMS = 65536
_MAX_STATE = int(max(MemberState))
_MAX_VARINT = 5
"""Bytes of the longest varint a 32-bit counter needs."""


def digest_key(node_id: str) -> bytes:
    """A short fixed-size key for a node id, so a digest costs about 10 bytes a member whatever ids look like."""
    return hashlib.blake2b(node_id.encode(), digest_size=KEY_SIZE).digest()


def pack_digest_item(key: bytes, incarnation: int, state: int, suspectors: int, figures_version: int) -> bytes:
    """Key, varint incarnation, one byte of state (high nibble) and suspector count, varint figures version.

    Incarnations stay near zero and figure versions grow by one every few seconds, so an item
    is about 10 bytes where fixed-width fields took 18.
    """
    return key + _varint(incarnation) + bytes(((state << 4) | suspectors,)) + _varint(figures_version)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class MemberTable:
    """Every known node, this one included; merges news and says what a peer is missing.

    Pure bookkeeping, no I/O and no clock: callers pass `now`, so the same table drives the
    live service and the round-level benchmark simulator.
    """

    def __init__(self, own: NodeRecord) -> None:
        self.own_id = own.node_id
        self._records: dict[str, NodeRecord] = {}
        self._keys: dict[bytes, str] = {}
        self._key_of: dict[str, bytes] = {}
        self._digest: bytes | None = None
        self.suspects: set[str] = set()
        """Ids of suspect members: the only records the suspicion sweeper needs to look at."""
        self._active: dict[str, None] = {}
        """Ids of active peers, kept as records change: probes and gossip ask for them many times a second."""
        self.put(own)

    def __len__(self) -> int:
        return len(self._records)

    @property
    def own(self) -> NodeRecord:
        return self._records[self.own_id]

    def get(self, node_id: str) -> NodeRecord | None:
        return self._records.get(node_id)

    def records(self) -> tuple[NodeRecord, ...]:
        return tuple(self._records.values())

    def active_peers(self) -> list[NodeRecord]:
        """Alive and suspect members other than ourselves: those we probe and gossip with."""
        records = self._records
        return [records[node_id] for node_id in self._active]

    def active_count(self) -> int:
        return len(self._active) + (1 if self.own.is_active else 0)

    def random_peers(self, count: int, rng: random.Random, *, exclude: Iterable[str] = ()) -> list[NodeRecord]:
        excluded = set(exclude)
        peers = [r for r in self.active_peers() if r.node_id not in excluded]
        return rng.sample(peers, min(count, len(peers)))

    def put(self, record: NodeRecord) -> None:
        """Store a record as is: our own updates, and the outcome of local decisions."""
        if record.node_id not in self._key_of:
            key = digest_key(record.node_id)
            self._key_of[record.node_id] = key
            self._keys[key] = record.node_id
        node_id = record.node_id
        self._records[node_id] = record
        self._digest = None
        if record.state == MemberState.SUSPECT:
            self.suspects.add(node_id)
        else:
            self.suspects.discard(node_id)
        if record.is_active and node_id != self.own_id:
            self._active[node_id] = None
        else:
            self._active.pop(node_id, None)

    def merge(self, remote: NodeRecord, now: float) -> tuple[NodeRecord | None, NodeRecord] | None:
        """Merge news about another node; returns (before, after) if the table changed."""
        before = self._records.get(remote.node_id)
        after = merge_records(before, remote, now)
        if after is None:
            return None
        self.put(after)
        return before, after

    def touch(self, node_id: str, now: float) -> None:
        """Note direct evidence that a node is alive (it answered or wrote to us)."""
        record = self._records.get(node_id)
        if record is not None and record.heard_at < now:
            self._records[node_id] = replace(record, heard_at=now)

    def forget(self, older_than: float) -> list[NodeRecord]:
        """Drop dead and departed members whose state is older than `older_than`."""
        gone = [
            r
            for r in self._records.values()
            if not r.is_active and r.state_since < older_than and r.node_id != self.own_id
        ]
        for record in gone:
            del self._records[record.node_id]
            self.suspects.discard(record.node_id)
            self._active.pop(record.node_id, None)
            del self._keys[self._key_of.pop(record.node_id)]
            self._digest = None
        return gone

    def digest(self) -> bytes:
        if self._digest is None:
            pack = pack_digest_item
            key_of = self._key_of
            self._digest = b"".join(
                pack(key_of[r.node_id], r.incarnation, r.state, len(r.suspectors), r.figures_version)
                for r in self._records.values()
            )
        return self._digest

    def compare(self, peer_digest: bytes) -> tuple[list[NodeRecord], bytes]:
        """Given a peer's digest: the records it would learn from, and the keys we would learn from."""
        if peer_digest == self.digest():
            return [], b""
        theirs = parse_digest(peer_digest)
        send = []
        wants = []
        for record in self._records.values():
            key = self._key_of[record.node_id]
            other = theirs.pop(key, None)
            mine = _version(record)
            if other == mine:
                continue
            if other is None or _teaches(mine, other):
                send.append(record)
            if other is not None and _teaches(other, mine):
                wants.append(key)
        wants.extend(theirs)  # records we have never heard of
        return send, b"".join(wants)

    def wanted(self, wants: bytes) -> list[NodeRecord]:
        """Records named by a peer's want list (unknown keys are ignored)."""
        if len(wants) % KEY_SIZE or len(wants) > MAX_DIGEST_ITEMS * KEY_SIZE:
            raise ProtocolError(f"want list of {len(wants)} bytes is not a whole number of keys")
        found = []
        for start in range(0, len(wants), KEY_SIZE):
            node_id = self._keys.get(wants[start : start + KEY_SIZE])
            if node_id is not None:
                found.append(self._records[node_id])
        return found


_Version = tuple[int, int, int, int]


def parse_digest(digest: bytes) -> dict[bytes, _Version]:
    """Read a peer's digest, checking every item: a torn or out-of-range one is a ProtocolError."""
    items: dict[bytes, _Version] = {}
    size = len(digest)
    at = 0
    while at < size:
        if len(items) >= MAX_DIGEST_ITEMS:
            raise ProtocolError(f"digest lists more than {MAX_DIGEST_ITEMS} members")
        key = digest[at : at + KEY_SIZE]
        at += KEY_SIZE
        if at + 2 < size and digest[at] < 0x80:  # the usual one-byte incarnation, inline for speed
            incarnation = digest[at]
            at += 1
        else:
            incarnation, at = _read_varint(digest, at)
        if at >= size:
            raise ProtocolError(f"digest of {size} bytes ends inside an item")
        state, suspectors = digest[at] >> 4, digest[at] & 0x0F
        if state > _MAX_STATE or suspectors > MAX_SUSPECTORS:
            raise ProtocolError(f"digest item has a bad state byte {digest[at]:#04x}")
        figures_version, at = _read_varint(digest, at + 1)
        if key in items:
            raise ProtocolError("digest lists a member twice")
        items[key] = (incarnation, state, suspectors, figures_version)
    return items


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    for offset in range(_MAX_VARINT):
        if at + offset >= len(data):
            raise ProtocolError(f"digest of {len(data)} bytes ends inside an item")
        byte = data[at + offset]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value > MAX_COUNTER or (byte == 0 and offset > 0):
                raise ProtocolError(f"digest counter {value} is out of range or not minimally encoded")
            return value, at + offset + 1
        shift += 7
    raise ProtocolError(f"digest counter runs over {_MAX_VARINT} bytes")


def _version(record: NodeRecord) -> _Version:
    return record.incarnation, int(record.state), len(record.suspectors), record.figures_version


def _teaches(a: _Version, b: _Version) -> bool:
    """Would a record at version `a` change one at version `b` (see merge_records)?"""
    if a[0] != b[0]:
        return a[0] > b[0]
    if a[1] != b[1]:
        return a[1] > b[1] or a[3] > b[3]
    return a[3] > b[3] or (a[1] == MemberState.SUSPECT and a[2] > b[2])
