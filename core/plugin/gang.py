"""What a gang plugin author writes against: p members that exchange messages at supersteps (BSP).

A gang assignment is one calculation run by p members at once, each on its own host. It
advances in supersteps: every member steps once, reading the messages sent to it in the
previous superstep and returning the ones it sends; then all wait at the barrier. Between two
supersteps no message is in flight, so each member's state plus its undelivered inbox is a
consistent global checkpoint: that barrier is a gang's only migration point. The rules below
are the ones the runtime enforces; `run_gang_locally` enforces the same in one process.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from typing import Any

from frost_core.api.errors import PluginError
from frost_core.plugin.api import Output, Param, check_declarations, parse_params
from frost_core.plugin.limits import MAX_MEMBERS, MAX_OUTBOX_BYTES, MAX_RESULT_BYTES, MAX_STATE_BYTES, MEMBER_MEMORY
from frost_core.plugin.plain import decode_plain, encode_plain

Inbox = dict[int, list]
"""Messages delivered to one member: sender rank -> the messages it sent, in ascending sender order."""


@dataclasses.dataclass(frozen=True)
class Superstep:
    """What a member's `step` returns: its new state, what it sends, and whether the gang is done.

    `outbox` maps destination ranks (0 <= rank < size; a member may send to itself) to lists of
    plain messages, delivered at the start of the next superstep. A member that says `done`
    sends nothing: there is no next superstep to deliver in.
    """

    state: Any
    outbox: Mapping[int, list] = dataclasses.field(default_factory=dict)
    done: bool = False

    def to_plain(self) -> dict:
        """This answer as CBOR data: how a guest hands it to the runtime."""
        return {"state": self.state, "outbox": {dest: list(self.outbox[dest]) for dest in sorted(self.outbox)},
                "done": self.done}

    @classmethod
    def from_plain(cls, plain: object, rank: int, size: int, superstep: int) -> Superstep:
        """Rebuild and check an answer sent by `to_plain`; PluginError names what is malformed."""
        if not isinstance(plain, dict) or set(plain) != {"state", "outbox", "done"}:
            raise PluginError(f"superstep {superstep}: the answer of rank {rank} must be a map with state, outbox and done")
        return check_superstep(cls(plain["state"], plain["outbox"], plain["done"]), rank, size, superstep)


@dataclasses.dataclass(frozen=True)
class MemberCheckpoint:
    """Member `rank` at a barrier: the superstep it will run next, its state and the inbox for it.

    The members' checkpoints of the same barrier together are the gang's global checkpoint.
    Encoded it is at most MAX_STATE_BYTES, since it travels as a unit's state does.
    """

    rank: int
    superstep: int
    state: Any
    inbox: Inbox

    def to_bytes(self) -> bytes:
        plain = {"rank": self.rank, "superstep": self.superstep, "state": self.state, "inbox": self.inbox}
        return encode_plain(plain, f"rank {self.rank}'s state and inbox before superstep {self.superstep}", MAX_STATE_BYTES)

    @classmethod
    def from_bytes(cls, data: bytes, size: int) -> MemberCheckpoint:
        """Decode `to_bytes` data for a gang of `size` members; PluginError on anything malformed."""
        plain = decode_plain(data, "a gang member's checkpoint")
        if not isinstance(plain, dict) or set(plain) != {"rank", "superstep", "state", "inbox"}:
            raise PluginError("a gang member's checkpoint must be a map with rank, superstep, state and inbox")
        rank, superstep, inbox = plain["rank"], plain["superstep"], plain["inbox"]
        if not _is_rank(rank, size):
            raise PluginError(f"a gang member's checkpoint names rank {rank!r}, not one of 0 to {size - 1}")
        if not _is_count(superstep):
            raise PluginError(f"a gang member's checkpoint names superstep {superstep!r}, not an int >= 0")
        if not isinstance(inbox, dict) or any(not _is_rank(k, size) or not isinstance(v, list) for k, v in inbox.items()):
            raise PluginError(f"the inbox in a gang member's checkpoint must map ranks below {size} to lists")
        return cls(rank, superstep, plain["state"], {sender: inbox[sender] for sender in sorted(inbox)})


class GangPlugin(abc.ABC):
    """Base class of a gang plugin: `members` ranks run `start`, then `step` at every superstep.

    Declared like a unit `Plugin` (`name`, `version`, `description`, `params`). `step` depends
    only on its arguments (state, rank, size, inbox): no clocks, no unseeded randomness, so the
    result is bit-identical wherever and however often the gang moved. See docs/plugins.md.
    """

    name: str = ""
    version: str = ""
    description: str = ""
    params: tuple[Param, ...] = ()

    @abc.abstractmethod
    def members(self, params: dict) -> int:
        """How many members p the assignment has (1 <= p <= MAX_MEMBERS), from its parameters."""

    def member_memory(self, params: dict) -> int:
        """The bytes each member may use, from the parameters: its guest's memory limit, and a host needs
        that much free for guests to be chosen. Override it as a unit plugin sizes `memory_bytes`."""
        return MEMBER_MEMORY

    @abc.abstractmethod
    def start(self, params: dict, rank: int, size: int) -> Any:
        """The initial state of member `rank` of `size`."""

    @abc.abstractmethod
    def step(self, state: Any, rank: int, size: int, inbox: Inbox) -> Superstep:
        """One superstep of member `rank`: `inbox` holds what was sent to it in the previous one."""

    @abc.abstractmethod
    def finish(self, state: Any, rank: int, size: int) -> Any:
        """Member `rank`'s plain result, from its state after the superstep that said done."""

    @abc.abstractmethod
    def combine(self, params: dict, results: list) -> Output:
        """Merge the members' results (`results[rank]`) into the assignment's output."""


def check_gang_plugin(plugin: GangPlugin) -> GangPlugin:
    """Check a loaded gang plugin's declarations; PluginError says what is wrong."""
    return check_declarations(plugin)


def check_members(count: object) -> int:
    """The member count `members` returned, if it is an int from 1 to MAX_MEMBERS; PluginError if not."""
    if not _is_count(count) or not 1 <= count <= MAX_MEMBERS:  # type: ignore[operator]
        raise PluginError(f"members must return a whole number from 1 to {MAX_MEMBERS}, not {count!r}")
    return count  # type: ignore[return-value]


def check_member_memory(memory: object) -> int:
    """The bytes `member_memory` returned, if they are a whole number > 0; PluginError if not."""
    if not _is_count(memory) or memory == 0:
        raise PluginError(f"member_memory must return a whole number of bytes > 0, not {memory!r}")
    return memory  # type: ignore[return-value]


def check_superstep(answer: object, rank: int, size: int, superstep: int) -> Superstep:
    """Check one member's answer: a Superstep with a bool done and a plain outbox to ranks in range.

    Returns it with the outbox as it arrives: a decoded copy, in ascending destination order,
    without empty lists. A done member sends nothing; the encoded outbox is at most MAX_OUTBOX_BYTES.
    """
    where = f"superstep {superstep}: rank {rank}"
    if not isinstance(answer, Superstep):
        raise PluginError(f"{where}: step returned a {type(answer).__name__}, not a Superstep")
    if not isinstance(answer.done, bool):
        raise PluginError(f"{where}: done must be True or False, not {answer.done!r}")
    if not isinstance(answer.outbox, Mapping):
        raise PluginError(f"{where}: the outbox must map destination ranks to lists, not a {type(answer.outbox).__name__}")
    outbox = {}
    for dest, messages in answer.outbox.items():
        if not _is_rank(dest, size):
            raise PluginError(f"{where} sent to rank {dest!r}, but the ranks of this gang are 0 to {size - 1}")
        if not isinstance(messages, (list, tuple)):
            raise PluginError(f"{where}: the messages to rank {dest} must be a list, not a {type(messages).__name__}")
        if messages:
            outbox[dest] = list(messages)
    if answer.done and outbox:
        raise PluginError(f"{where} said done but sent messages to rank {min(outbox)}; "
                          "nothing can be delivered after the last superstep")
    sent = decode_plain(encode_plain(dict(sorted(outbox.items())), f"{where}: the messages", MAX_OUTBOX_BYTES), "messages")
    return Superstep(answer.state, sent, answer.done)


def check_agreement(done: list[bool], superstep: int) -> bool:
    """Whether the gang is done after `superstep` (`done[rank]` per member); all must agree."""
    if all(done) or not any(done):
        return done[0]
    finished = [rank for rank, flag in enumerate(done) if flag]
    going = [rank for rank, flag in enumerate(done) if not flag]
    raise PluginError(f"superstep {superstep}: {_ranks(finished)} said done but {_ranks(going)} did not; "
                      "all members must finish at the same superstep")


def deliver(outboxes: list[Mapping[int, list]], size: int) -> list[Inbox]:
    """Each rank's inbox for the next superstep from every rank's outbox, senders in ascending order."""
    inboxes: list[Inbox] = [{} for _ in range(size)]
    for sender, outbox in enumerate(outboxes):
        for dest, messages in outbox.items():
            inboxes[dest][sender] = list(messages)
    return inboxes


def run_gang_locally(plugin: GangPlugin, raw: Mapping[str, object] | None = None, *,
                     checkpoint_every: int | None = 1) -> Output:
    """Run a whole gang assignment in this process, superstep by superstep, for authors and tests.

    Messages always cross CBOR, as between hosts. Every `checkpoint_every` supersteps (and
    before the first) each member's state and undelivered inbox go through the checkpoint's
    encoding and come back decoded, as after a move; `None` passes states along untouched.
    The output is the reference a gang run on the cluster must equal bit for bit.
    """
    if checkpoint_every is not None and (not _is_count(checkpoint_every) or checkpoint_every < 1):
        raise PluginError(f"checkpoint_every must be a whole number >= 1 or None, not {checkpoint_every!r}")
    params = parse_params(plugin, raw or {})
    size = check_members(plugin.members(params))
    check_member_memory(plugin.member_memory(params))
    states = [plugin.start(params, rank, size) for rank in range(size)]
    inboxes: list[Inbox] = [{} for _ in range(size)]
    superstep = 0
    while True:
        if checkpoint_every is not None and superstep % checkpoint_every == 0:
            for rank in range(size):
                copy = MemberCheckpoint.from_bytes(MemberCheckpoint(rank, superstep, states[rank], inboxes[rank]).to_bytes(), size)
                states[rank], inboxes[rank] = copy.state, copy.inbox
        answers = [check_superstep(plugin.step(states[rank], rank, size, inboxes[rank]), rank, size, superstep)
                   for rank in range(size)]
        states = [answer.state for answer in answers]
        if check_agreement([answer.done for answer in answers], superstep):
            break
        inboxes = deliver([answer.outbox for answer in answers], size)
        superstep += 1
    results = [decode_plain(encode_plain(plugin.finish(states[rank], rank, size), f"the result of rank {rank}",
                                         MAX_RESULT_BYTES), "result") for rank in range(size)]
    return plugin.combine(params, results)


def _ranks(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_rank(value: object, size: int) -> bool:
    return _is_count(value) and value < size  # type: ignore[operator]
