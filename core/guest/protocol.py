"""The messages of the guest pipe (node <-> guest subprocess), framed exactly like the network.

Control messages are small registered wire messages. State and results can be megabytes, so
`GuestStart`, `GuestCheckpoint` and `GuestResult` are bulk headers: the bytes follow as raw
chunks (`wire.channel` send_bulk / write_bulk), never as one big CBOR item.
"""

from __future__ import annotations

import dataclasses

from frost_core.plugin.limits import MAX_OUTBOX_BYTES
from frost_core.storage.checkpoints import HEADER_CAP
from frost_core.wire.codes import MessageCode
from frost_core.wire.messages import MAX_MESSAGE_SIZE, Message, register


@register
@dataclasses.dataclass(frozen=True)
class GuestStart(Message):
    """Node -> guest, once per unit: what to run and where; bulk state follows (empty when the unit starts afresh
    or its state was handed over).

    The scratch folder and the address-space cap come here rather than on the command line
    because the process may have been started before its unit was known (a warm spare).
    """

    CODE = MessageCode.GUEST_START
    MAX_SIZE = MAX_MESSAGE_SIZE
    task_id: str
    plugin_path: str
    unit: bytes  # CBOR of WorkUnit.to_plain()
    max_state_bytes: int
    progress_interval: float
    resume: bool
    scratch: str
    address_space: int  # RLIMIT_AS in bytes; 0 for none
    readable: tuple[str, ...] = ()  # what the guest may read besides scratch (see confine.py); () leaves files open
    handed: int = 0
    """The saved state's size when it is handed over as a sealed memfd (see handoff.py): the bulk data that
    follows is then empty, or the state itself where the node could not hand it over. 0: the state, if any,
    follows as bulk data."""


@register
@dataclasses.dataclass(frozen=True)
class GuestProgress(Message):
    """Guest -> node after a step (throttled): the plugin's progress and the steps done so far."""

    CODE = MessageCode.GUEST_PROGRESS
    MAX_SIZE = 64
    progress: float
    steps: int


@register
@dataclasses.dataclass(frozen=True)
class GuestCheckpointRequest(Message):
    """Node -> guest: send your state at the next migration point."""

    CODE = MessageCode.GUEST_CHECKPOINT_REQUEST
    MAX_SIZE = 64 + HEADER_CAP
    request_id: int
    hash_prefix: bytes = b""
    """What the checkpoint's SHA-256 hashes before the state (`checkpoints.identity_prefix`): given, the guest
    hashes its own state, and may answer through the checkpoint memfd the node sent it (see handoff.py), with
    the size and that hash, instead of sending the state up the pipe (with the hash after it, then). Empty:
    through the pipe, unhashed (a move's capture, which the node sends on, and hashes, while it comes up)."""
    outbox_room: int = 0
    """The biggest state that may go through the memfd (its pages count against the guest's memory cap,
    `limits.outbox_room`); a bigger one goes up the pipe."""


@register
@dataclasses.dataclass(frozen=True)
class GuestCheckpoint(Message):
    """Guest -> node: answers a request; the canonical CBOR state follows as bulk data, unless it is `handed`."""

    CODE = MessageCode.GUEST_CHECKPOINT
    MAX_SIZE = 256
    request_id: int
    progress: float
    steps: int
    encode_seconds: float
    handed: int = 0
    """The state's size when it is in the checkpoint memfd (no bulk data follows; a GuestCheckpointHash follows
    with the hash of the request's `hash_prefix` and the state, so the node copies it while the guest hashes);
    0: it follows as bulk data."""
    hash_follows: bool = False
    """With bulk data: a GuestCheckpointHash follows it, taken by the guest while the node writes the state (an
    answer of 256 KiB to 4 MiB, `child.HASH_AFTER_FROM` to `HAND_OUT_FROM`, to a request with a `hash_prefix`)."""


@register
@dataclasses.dataclass(frozen=True)
class GuestCheckpointHash(Message):
    """Guest -> node, right after a handed GuestCheckpoint or the state of one that says `hash_follows`: the
    hash, once taken."""

    CODE = MessageCode.GUEST_CHECKPOINT_HASH
    MAX_SIZE = 128
    request_id: int
    sha256: str


@register
@dataclasses.dataclass(frozen=True)
class GuestResult(Message):
    """Guest -> node: the unit is done; its canonical CBOR result follows as bulk data."""

    CODE = MessageCode.GUEST_RESULT
    MAX_SIZE = 64
    steps: int


@register
@dataclasses.dataclass(frozen=True)
class GuestFailed(Message):
    """Guest -> node: the unit cannot go on (kind: plugin, state, memory, protocol, files), with the reason."""

    CODE = MessageCode.GUEST_FAILED
    MAX_SIZE = 8192
    kind: str
    reason: str


@register
@dataclasses.dataclass(frozen=True)
class GuestLog(Message):
    """Guest -> node: the runtime's own notes (e.g. a priority step the OS refused)."""

    CODE = MessageCode.GUEST_LOG
    MAX_SIZE = 8192
    level: str
    text: str


@register
@dataclasses.dataclass(frozen=True)
class GuestFileRequest(Message):
    """Guest -> node: the plugin opens input file `name`; the guest waits for Ready or Refused."""

    CODE = MessageCode.GUEST_FILE_REQUEST
    MAX_SIZE = 1024
    name: str


@register
@dataclasses.dataclass(frozen=True)
class GuestFileReady(Message):
    """Node -> guest: input file `name` is complete and verified at `path` (read-only, outside the scratch folder)."""

    CODE = MessageCode.GUEST_FILE_READY
    MAX_SIZE = 8192
    name: str
    path: str


@register
@dataclasses.dataclass(frozen=True)
class GuestFileRefused(Message):
    """Node -> guest: no input file `name` here. `retryable`: another try (on any host) may succeed."""

    CODE = MessageCode.GUEST_FILE_REFUSED
    MAX_SIZE = 8192
    name: str
    reason: str
    retryable: bool


@register
@dataclasses.dataclass(frozen=True)
class GuestDenied(Message):
    """Guest -> node, at a migration point: the kernel refused plugin code something (see `refusals.py`)."""

    CODE = MessageCode.GUEST_DENIED
    MAX_SIZE = 2048
    attempt: str  # what it tried, e.g. "open '/data/cluster.key' for reading"
    reason: str  # the kernel's answer, e.g. "PermissionError: Permission denied"



# --- a gang member (see member.py and gang_member.py): driven superstep by superstep ---------------

MAX_ANSWER_BYTES = MAX_OUTBOX_BYTES + 1024
"""The bulk data of a GuestSuperstepAnswer: a checked outbox and the map around it."""


@register
@dataclasses.dataclass(frozen=True)
class GuestMemberStart(Message):
    """Node -> guest, once: run member `rank` of a gang of `size`; its MemberCheckpoint follows as bulk
    data (empty when it starts afresh). The other fields mean what GuestStart's do."""

    CODE = MessageCode.GUEST_MEMBER_START
    MAX_SIZE = MAX_MESSAGE_SIZE
    task_id: str
    plugin_path: str
    params: bytes  # CBOR of the assignment's parameters as given (the plugin parses them)
    rank: int
    size: int
    max_state_bytes: int
    scratch: str
    address_space: int
    readable: tuple[str, ...] = ()


@register
@dataclasses.dataclass(frozen=True)
class GuestMemberReady(Message):
    """Guest -> node, once: confined, with the plugin loaded; what runs from here is plugin code (`members`,
    `start`, the supersteps), so the node's step timeout counts from here, not from the interpreter's start."""

    CODE = MessageCode.GUEST_MEMBER_READY
    MAX_SIZE = 64
    rank: int


@register
@dataclasses.dataclass(frozen=True)
class GuestSuperstep(Message):
    """Node -> guest: run `superstep` (the member's next, or it fails); the CBOR inbox follows as bulk data."""

    CODE = MessageCode.GUEST_SUPERSTEP
    MAX_SIZE = 64
    superstep: int


@register
@dataclasses.dataclass(frozen=True)
class GuestSuperstepAnswer(Message):
    """Guest -> node: `superstep` ran; the CBOR of its `Superstep.to_plain()`, state None, follows as bulk data."""

    CODE = MessageCode.GUEST_SUPERSTEP_ANSWER
    MAX_SIZE = 64
    superstep: int


@register
@dataclasses.dataclass(frozen=True)
class GuestMemberCheckpointRequest(Message):
    """Node -> guest at a barrier: your MemberCheckpoint before `superstep`; the inbox for it follows as bulk data."""

    CODE = MessageCode.GUEST_MEMBER_CHECKPOINT_REQUEST
    MAX_SIZE = 64
    superstep: int


@register
@dataclasses.dataclass(frozen=True)
class GuestMemberCheckpoint(Message):
    """Guest -> node: answers the request; `MemberCheckpoint.to_bytes()` follows as bulk data."""

    CODE = MessageCode.GUEST_MEMBER_CHECKPOINT
    MAX_SIZE = 64
    superstep: int
    encode_seconds: float


@register
@dataclasses.dataclass(frozen=True)
class GuestMemberFinish(Message):
    """Node -> guest, once the gang is done after `superstep`: send your `finish` result."""

    CODE = MessageCode.GUEST_MEMBER_FINISH
    MAX_SIZE = 64
    superstep: int


@register
@dataclasses.dataclass(frozen=True)
class GuestMemberResult(Message):
    """Guest -> node: the member's canonical CBOR result follows as bulk data."""

    CODE = MessageCode.GUEST_MEMBER_RESULT
    MAX_SIZE = 64
    superstep: int
