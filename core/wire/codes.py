"""Numeric message codes: part of the protocol, so append-only — never renumber or reuse."""

import enum

PROTOCOL_VERSION = 2
"""2: streams are sealed with AES-OCB3 (1 used AES-GCM), so a node of the other kind is refused at the handshake."""


class MessageCode(enum.IntEnum):
    # Stream handshake (TCP, and the guest pipe).
    HELLO = 1
    HELLO_ACK = 2
    HELLO_REFUSED = 3
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
    # Units between a master and its hosts, and moves between hosts (core/cluster/messages.py).
    UNIT_OFFER = 40
    UNIT_OFFER_REPLY = 41
    UNIT_START = 42
    VERDICT = 43
    UNIT_REPORT = 44
    UNIT_REPORT_REPLY = 45
    UNIT_RESULT = 46
    UNIT_RETURN = 48
    UNIT_FAILED = 49
    UNIT_MOVED = 54
    MOVE_COMMAND = 56
    WORK_REQUEST = 58
    # Checkpoint replication to the master and to peers (core/cluster/replication.py).
    CHECKPOINT_REPLICA = 60
    REPLICA_FETCH = 61
    FIGURES_QUERY = 62
    FIGURES_REPLY = 63
    CHECKPOINT_TRAILER = 64
    # Plugin code by content hash (core/cluster/code_shipping.py).
    PLUGIN_FETCH = 65
    PLUGIN_CODE = 66
    # Remote file access (core/cluster/files.py).
    FILE_FETCH = 70
    FILE_DATA = 71
    # Reconciliation: a master asks a host it hears again what it holds (core/cluster/messages.py).
    HOLDINGS_QUERY = 80
    HOLDINGS = 81
    # Signed ledger summaries, pushed and pulled between peers (core/ledger/exchange.py).
    LEDGER_EXCHANGE = 90
    LEDGER_EXCHANGE_REPLY = 91
    # Several units placed in one call: a master's placement round per host (core/cluster/messages.py).
    UNIT_OFFERS = 84
    UNIT_OFFER_REPLIES = 85
    UNIT_STARTS = 86
    VERDICTS = 87
    # A host that keeps a free CPU for a master's submitter (a share hold) tells that master (core/cluster/messages.py).
    SLOT_KEPT = 88
    # A master that will not start units a host accepted (cancelled meanwhile) frees their room (core/cluster/messages.py).
    OFFERS_WITHDRAWN = 89
    # A gang assignment's coordinator and the hosts of its members (core/cluster/messages.py).
    GANG_START = 120
    GANG_RELEASE = 121
    GANG_TAKE_CHECKPOINT = 122
    GANG_STOP = 123
    GANG_REPORT = 124
    GANG_CHECKPOINT = 125
    GANG_MAIL = 126
    GANG_MAIL_ACK = 127
    GANG_MAIL_BOUNCED = 128
    GANG_LOST = 129
    GANG_HOST_STATE = 130
    # Local control socket (CLI -> node).
    CONTROL_REQUEST = 100
    CONTROL_REPLY = 101
    # An attached UI (node -> UI snapshots, UI -> node one-way commands; core/node/attach_protocol.py).
    ATTACH_REQUEST = 110
    SNAPSHOT_PUSH = 111
    ATTACH_COMMAND = 112
    KEEP_ALIVE = 113
    # Guest pipe (node <-> guest subprocess).
    GUEST_START = 200
    GUEST_PROGRESS = 201
    GUEST_CHECKPOINT_REQUEST = 202
    GUEST_CHECKPOINT = 203
    GUEST_RESULT = 204
    GUEST_FAILED = 205
    GUEST_STOP = 206
    GUEST_LOG = 207
    GUEST_FILE_REQUEST = 208
    GUEST_FILE_READY = 209
    GUEST_FILE_REFUSED = 210
    GUEST_DENIED = 211
    # A gang member in a guest, driven superstep by superstep (core/guest/protocol.py).
    GUEST_MEMBER_START = 212
    GUEST_SUPERSTEP = 213
    GUEST_SUPERSTEP_ANSWER = 214
    GUEST_MEMBER_CHECKPOINT_REQUEST = 215
    GUEST_MEMBER_CHECKPOINT = 216
    GUEST_MEMBER_FINISH = 217
    GUEST_MEMBER_RESULT = 218
    GUEST_MEMBER_READY = 219
    GUEST_CHECKPOINT_HASH = 220  # after a GUEST_CHECKPOINT handed through the checkpoint memfd
