"""The local resource table and the sans-IO half of push-pull: digests, deltas and wants."""

from __future__ import annotations

import functools
import hashlib
import random
from dataclasses import replace
from collections.abc import Iterable, Mapping

from frost_core.api.errors import ProtocolError
from frost_core.membership.records import MAX_COUNTER, MAX_SUSPECTORS, MemberState, NodeRecord, merge_records

KEY_SIZE = 6
"""Bytes of a digest key: two of 1000 nodes collide with odds of about 2e-9."""
MAX_DIGEST_ITEMS = 65536
_MAX_STATE = int(max(MemberState))
_MAX_VARINT = 5
"""Bytes of the longest varint a 32-bit counter needs."""


@functools.lru_cache(maxsize=1 << 16)
def digest_key(node_id: str) -> bytes:
    """A short fixed-size key for a node id, so a digest costs about 10 bytes a member whatever ids look like.

    Cached: every exchange keys the records it offers, and the tables of one process share the bytes.
    """
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
    live service and the round-level benchmark simulator. Records are kept in the order they
    last changed, so the news (what changed since a moment) costs what changed, not the table.
    """

    def __init__(self, own: NodeRecord) -> None:
        self.own_id = own.node_id
        self._records: dict[str, NodeRecord] = {}
        """Every record, the one changed last at the end."""
        self._keys: dict[bytes, str] = {}
        self.suspects: set[str] = set()
        """Ids of suspect members: the only records the suspicion sweeper needs to look at."""
        self._active: dict[str, None] = {}
        """Ids of active peers, kept as records change: probes and gossip ask for them many times a second."""
        self._inactive: dict[str, None] = {}
        """Ids of dead and departed peers: the only records `forget` needs to look at."""
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

    def active_ids(self) -> list[str]:
        return list(self._active)

    def active_count(self) -> int:
        return len(self._active) + (1 if self.own.is_active else 0)

    def active_peer_count(self) -> int:
        return len(self._active)

    def random_peers(self, count: int, rng: random.Random, *, exclude: Iterable[str] = ()) -> list[NodeRecord]:
        """Up to `count` active peers chosen uniformly, none of `exclude`; costs O(count), not a pass over the table."""
        excluded = set(exclude)
        ids = self.active_ids()
        picked = rng.sample(ids, min(count + len(excluded), len(ids)))
        records = self._records
        return [records[node_id] for node_id in picked if node_id not in excluded][:count]

    def put(self, record: NodeRecord) -> None:
        """Store a record as is: our own updates, and the outcome of local decisions."""
        node_id = record.node_id
        if self._records.pop(node_id, None) is None:
            self._keys[digest_key(node_id)] = node_id
        self._records[node_id] = record
        if record.state == MemberState.SUSPECT:
            self.suspects.add(node_id)
        else:
            self.suspects.discard(node_id)
        if node_id == self.own_id:
            return
        if record.is_active:
            self._active[node_id] = None
            self._inactive.pop(node_id, None)
        else:
            self._active.pop(node_id, None)
            self._inactive[node_id] = None

    def put_formed(self, records: Mapping[str, NodeRecord], keys: Mapping[bytes, str]) -> None:
        """Store the alive records of a formed cluster at once (the benchmarks' start: N tables of N records).

        The same as `put` for each, at dict speed (25 million puts one by one take minutes);
        `keys` maps `digest_key` of each id to the id, computed once for all N tables.
        """
        own = self._records.pop(self.own_id)
        self._records.update(records)
        self._records[self.own_id] = own
        self._keys.update(keys)
        self._active.update(dict.fromkeys(records))
        self._active.pop(self.own_id, None)

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
        records = self._records
        gone = [records[node_id] for node_id in self._inactive if records[node_id].state_since < older_than]
        for record in gone:
            del records[record.node_id]
            self.suspects.discard(record.node_id)
            del self._inactive[record.node_id]
            del self._keys[digest_key(record.node_id)]
        return gone

    def drop_peers(self) -> int:
        """Forget every other member at once (this node joined another cluster); how many there were."""
        dropped = len(self._records) - 1
        own = self.own
        self._records, self._keys = {}, {}
        self.suspects.clear()
        self._active.clear()
        self._inactive.clear()
        self.put(own)
        return dropped

    def changed_since(self, since: float) -> list[NodeRecord]:
        """Records that changed at or after `since` (the news), newest first; walks only those."""
        news = []
        for record in reversed(self._records.values()):
            if record.updated_at < since:
                break
            news.append(record)
        return news

    def digest(self, since: float | None = None) -> bytes:
        """Key and version of every record, or of the news since `since` only."""
        records = self._records.values() if since is None else self.changed_since(since)
        pack = pack_digest_item
        return b"".join(
            pack(digest_key(r.node_id), r.incarnation, r.state, len(r.suspectors), r.figures_version) for r in records
        )

    def compare(self, peer_digest: bytes, *, since: float | None = None) -> tuple[list[NodeRecord], bytes]:
        """Given a peer's digest: the records it would learn from, and the keys we would learn from.

        With `since` None the digest covers the peer's whole table, so every record it lacks is
        sent; otherwise it covers the peer's news, and of the records it does not name only our
        own news since `since` is sent. Either way the work is the digest plus what is sent.
        """
        theirs = parse_digest(peer_digest)
        records = self._records
        keys = self._keys
        send = []
        wants = []
        for key, other in theirs.items():
            node_id = keys.get(key)
            if node_id is None:
                wants.append(key)  # a record we have never heard of
                continue
            record = records[node_id]
            mine = _version(record)
            if other == mine:
                continue
            if _teaches(mine, other):
                send.append(record)
            if _teaches(other, mine):
                wants.append(key)
        ours = records.values() if since is None else self.changed_since(since)
        send.extend(r for r in ours if digest_key(r.node_id) not in theirs)
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
