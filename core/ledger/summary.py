"""What one node tells the cluster about its own giving and receiving: bounded, signed, checked on arrival.

A summary is built from the node's own ledger and carries only totals: per peer (the top
`TOP_PEERS`, the rest folded into the node's overall totals) and, for fair share, what it gave each
submitter (the top `TOP_SUBMITTERS`) in hourly buckets of the last `USAGE_BUCKETS` hours plus one
bucket for everything older, so a peer can decay it with any half-life. Its canonical CBOR
encoding is what the node signs; the body, the signature and the public key travel together, and
anyone may relay them: altering a byte breaks the signature.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from frost_core.api.errors import AuthenticationError, ProtocolError
from frost_core.ledger.signing import NodeKey, verify
from frost_core.wire.codec import decode_strict, encode
from frost_core.wire.messages import from_plain, to_plain

TOP_PEERS = 16
TOP_SUBMITTERS = 8
BUCKET_SECONDS = 3600.0
USAGE_BUCKETS = 24
MAX_BODY_BYTES = 8 * 1024
"""A summary stays well under this with the caps above (~3 KB); anything larger is refused unread."""


@dataclass(frozen=True)
class PeerTotal:
    peer: str
    given: float        # normalised CPU-seconds this node's host gave that peer's units
    received: float     # normalised CPU-seconds this node's units received from that host


@dataclass(frozen=True)
class SubmitterUsage:
    submitter: str
    buckets: tuple[tuple[float, float], ...]   # (when, normalised CPU-seconds given) oldest first


@dataclass(frozen=True)
class Summary:
    node_id: str
    issued_at: float            # the issuer's wall clock: a newer summary replaces an older one
    speed: float                # the issuer's calibrated speed (its CPU-second in speed units)
    given: float                # totals over every peer, this node included
    received: float
    peers: tuple[PeerTotal, ...] = ()
    usage: tuple[SubmitterUsage, ...] = ()


@dataclass(frozen=True)
class SignedSummary:
    body: bytes                 # canonical CBOR of a Summary
    signature: bytes
    public_key: bytes


def build_summary(node_id: str, issued_at: float, speed: float, peers: Mapping[str, tuple[float, float]],
                  given_to: Iterable[tuple[str, float, float]]) -> Summary:
    """A bounded summary from per-peer (given, received) totals and (submitter, normalised CPU, when) records.

    Deterministic: ties are broken by id, so two builds of one ledger sign the same bytes.
    """
    top = sorted(peers.items(), key=lambda item: (-(item[1][0] + item[1][1]), item[0]))[:TOP_PEERS]
    edge = math.floor(issued_at / BUCKET_SECONDS) * BUCKET_SECONDS - (USAGE_BUCKETS - 1) * BUCKET_SECONDS
    per: dict[str, dict[float, float]] = {}
    older: dict[str, tuple[float, float]] = {}   # submitter -> (CPU, CPU-weighted time) before the buckets
    for submitter, cpu, at in given_to:
        if at >= edge:
            start = math.floor(at / BUCKET_SECONDS) * BUCKET_SECONDS
            per.setdefault(submitter, {})[start] = per.get(submitter, {}).get(start, 0.0) + cpu
        else:
            total, weighted = older.get(submitter, (0.0, 0.0))
            older[submitter] = (total + cpu, weighted + cpu * at)
    totals = {s: sum(per.get(s, {}).values()) + older.get(s, (0.0, 0.0))[0] for s in set(per) | set(older)}
    usage = []
    for submitter in sorted(totals, key=lambda s: (-totals[s], s))[:TOP_SUBMITTERS]:
        # An hour's CPU counts as of the hour's middle (at most now): off by half an hour at worst.
        hours = per.get(submitter, {})
        buckets = sorted((min(start + BUCKET_SECONDS / 2, issued_at), cpu) for start, cpu in hours.items())
        if submitter in older and older[submitter][0] > 0:
            total, weighted = older[submitter]
            buckets.insert(0, (weighted / total, total))   # the older records at their mean time
        usage.append(SubmitterUsage(submitter, tuple(buckets)))
    return Summary(
        node_id=node_id, issued_at=issued_at, speed=speed,
        given=sum(g for g, _ in peers.values()), received=sum(r for _, r in peers.values()),
        peers=tuple(PeerTotal(peer, given, received) for peer, (given, received) in top), usage=tuple(usage),
    )


def sign_summary(key: NodeKey, summary: Summary) -> SignedSummary:
    body = encode(to_plain(Summary, summary))
    return SignedSummary(body=body, signature=key.sign(body), public_key=key.public)


def open_summary(signed: SignedSummary, pinned_key: bytes | None) -> Summary:
    """The summary inside `signed`, checked; AuthenticationError if forged or altered, ProtocolError if malformed.

    `pinned_key` is the public key already known for the node the summary names (None: first
    contact, its own key is taken). A summary signed by any other key is a forgery, however valid
    its signature: a peer cannot speak for another node with a key of its own.
    """
    if len(signed.body) > MAX_BODY_BYTES:
        raise ProtocolError(f"a ledger summary of {len(signed.body)} bytes is over its cap of {MAX_BODY_BYTES}")
    verify(signed.public_key, signed.signature, signed.body)
    summary = from_plain(Summary, decode_strict(signed.body))
    if pinned_key is not None and pinned_key != signed.public_key:
        raise AuthenticationError(f"the summary of {summary.node_id[:8]} is signed by a key that is not that node's")
    if not all(math.isfinite(v) and v >= 0 for v in _figures(summary)):
        raise ProtocolError(f"the summary of {summary.node_id[:8]} holds a negative or non-finite figure")
    return summary


def _figures(summary: Summary) -> Iterable[float]:
    yield from (summary.issued_at, summary.speed, summary.given, summary.received)
    for peer in summary.peers:
        yield from (peer.given, peer.received)
    for usage in summary.usage:
        for _, cpu in usage.buckets:
            yield cpu
