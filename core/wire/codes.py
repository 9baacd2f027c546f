"""Numeric message codes: part of the protocol, so append-only — never renumber or reuse."""

import enum

PROTOCOL_VERSION = 1


class MessageCode(enum.IntEnum):
    # Stream handshake (TCP, and the guest pipe).
    HELLO = 1
    HELLO_ACK = 2
    # Bulk transfer: a CBOR header, then raw chunks, then an end marker.
    BULK_BEGIN = 5
    BULK_CHUNK = 6
    BULK_END = 7
    # Discovery (UDP).
    ANNOUNCE = 10
    ANNOUNCE_REPLY = 11
    LEAVE = 12
    # Failure detection (UDP, SWIM).
    PING = 20
    PING_REQ = 21
    ACK = 22
    NACK = 23
    # Anti-entropy gossip of the resource vector.
    PUSH_PULL = 30
    PUSH_PULL_REPLY = 31
    RESOURCE_UPDATE = 32
    # Local control socket (CLI -> node).
    CONTROL_REQUEST = 100
    CONTROL_REPLY = 101
    # Guest pipe (node <-> guest subprocess).
    GUEST_START = 200
    GUEST_PROGRESS = 201
    GUEST_CHECKPOINT_REQUEST = 202
    GUEST_CHECKPOINT = 203
    GUEST_RESULT = 204
    GUEST_FAILED = 205
    GUEST_STOP = 206
    GUEST_LOG = 207
