"""A fake cluster that drives the gang coordinator and host sites with the real heat-diffusion members.

Every message between hosts and the coordinator waits in one queue, so a test picks the order
of delivery, duplicates or replays messages, and crashes, cuts off or evicts hosts between any
two of them. Guests run the plugin's own `step` in-process; states and results cross CBOR as
they would between machines.
"""

from __future__ import annotations

import dataclasses

from frost_core.cluster.gang_site import (
    COORDINATOR,
    BarrierReport,
    EvictMembers,
    GangSite,
    KillMember,
    LaunchMember,
    Mail,
    RunStep,
    Send,
    SendFailed,
    StepDone,
    WriteCheckpoint,
    CheckpointReport,
)
from frost_core.master.gang import (
    Combine,
    GangCoordinator,
    GangFailed,
    HostBack,
    HostLost,
    MoveGang,
    Received,
    Refused,
    TableChanged,
)
from frost_core.plugin.api import parse_params
from frost_core.plugin.gang import MemberCheckpoint, check_superstep, deliver
from frost_core.plugin.limits import MAX_RESULT_BYTES
from frost_core.plugin.plain import decode_plain, encode_plain
from frost_core.policies.gang_migration import CheckCadence
from frost_core.policies.views import NodeView
from frost_plugins.heat_diffusion import plugin as heat

PARAMS = {"height": "14", "width": "6", "members": "3", "iterations": "7"}


def reference_runs(raw: dict = PARAMS) -> dict[tuple[int, int], list]:
    """(rank, superstep) -> the inbox (as items, sender order) that member reads in one process."""
    params = parse_params(heat, raw)
    size = heat.members(params)
    states = [heat.start(params, rank, size) for rank in range(size)]
    inboxes = [{} for _ in range(size)]
    runs = {}
    for superstep in range(10_000):
        answers = []
        for rank in range(size):
            runs[rank, superstep] = list(inboxes[rank].items())
            answers.append(check_superstep(heat.step(states[rank], rank, size, inboxes[rank]), rank, size, superstep))
        states = [answer.state for answer in answers]
        if answers[0].done:
            return runs
        inboxes = deliver([answer.outbox for answer in answers], size)
    raise AssertionError("the reference never finished")


class FakeCluster:
    """Hosts h0..h(n-1), one coordinator, one queue of messages in flight."""

    def __init__(self, hosts: int = 5, raw: dict = PARAMS, cadence: CheckCadence = CheckCadence(every_supersteps=2)):
        self.params = parse_params(heat, raw)
        self.size = heat.members(self.params)
        self.coordinator = GangCoordinator("g", self.size, cadence=cadence)
        self.names = [f"h{i}" for i in range(hosts)]
        self.rows = {name: NodeView(name, available=1.0, guests=0) for name in self.names}
        self.sites = {name: GangSite("g", name) for name in self.names}
        self.guests: dict[tuple[str, int], tuple[int, object]] = {}
        self.queue: list[tuple[str, str, object]] = []   # (from, to, message)
        self.parked: list[tuple[str, str, object]] = []  # to or from a cut-off host
        self.history: list[tuple[str, str, object, int | None]] = []
        self.crashed: set[str] = set()
        self.incarnation = {name: 0 for name in self.names}   # a restarted host gets no mail of its last life
        self.cut: set[str] = set()
        self.now = 0.0
        self.output = None
        self.runs: dict[tuple[int, int, int], list] = {}   # (epoch, rank, superstep) -> inbox items
        self.applied: set[tuple[int, int, int]] = set()
        self.refused: list[Refused] = []
        self.forwarded = 0
        self.table_changed()

    # What a test does.

    def table_changed(self) -> None:
        self._coordinator(TableChanged(self.now, tuple(self.rows.values())))

    def deliver(self, index: int) -> None:
        source, to, message = self.queue.pop(index % len(self.queue))
        self.history.append((source, to, message, self.incarnation.get(to)))
        self.now += 1.0
        if to == COORDINATOR:
            self._coordinator(Received(self.now, message), source)
        elif isinstance(to, tuple):   # a guest's answer to its own host
            self._site(to[1], message)
        else:
            if isinstance(message, Mail) and source != COORDINATOR and source != message.reply_to:
                self.forwarded += 1
            self._site(to, message)

    def duplicate(self, index: int) -> None:
        self.queue.append(self.queue[index % len(self.queue)])

    def replay(self, index: int) -> None:
        """Send again something delivered long ago (a late or repeated report, mail or start)."""
        source, to, message, incarnation = self.history[index % len(self.history)]
        if self.incarnation.get(to) == incarnation:
            self._send(source, to, message)

    def member_host(self, rank: int) -> str | None:
        return self.coordinator.hosts()[rank % self.size]

    def hog(self, host: str) -> None:
        self.rows[host] = dataclasses.replace(self.rows[host], owner_active=True, available=0.0)
        self.table_changed()

    def evict(self, host: str) -> None:
        """The owner evicts: the host's members stop at once and it takes no guests for a while."""
        self.rows[host] = dataclasses.replace(self.rows[host], owner_active=True, available=0.0, accepting=False)
        if host not in self.crashed:
            self._run(host, self.sites[host].handle(EvictMembers()))
        self._coordinator(HostLost(self.now, host, "evicting"))
        self.table_changed()

    def owner_leaves(self, host: str) -> None:
        was_evicting = not self.rows[host].accepting
        self.rows[host] = NodeView(host, available=1.0, guests=0)
        if was_evicting:
            self._coordinator(HostBack(self.now, host))
        self.table_changed()

    def crash(self, host: str) -> None:
        """kill -9 of the host: its guests and bookkeeping are gone, messages to it fail."""
        self.crashed.add(host)
        self.incarnation[host] += 1
        self.cut.discard(host)
        self.guests = {key: value for key, value in self.guests.items() if key[0] != host}
        self.sites[host] = GangSite("g", host)
        for item in [item for item in self.queue if item[1] == host or item[1] == ("guest", host)]:
            self.queue.remove(item)
            self._failed(item)
        self._coordinator(HostLost(self.now, host, "crashed"))

    def revive(self, host: str) -> None:
        self.crashed.discard(host)
        self._coordinator(HostBack(self.now, host))

    def cut_off(self, host: str) -> None:
        """A partition: the host goes on alone; what it sends or is sent waits until it heals."""
        self.cut.add(host)
        for item in [item for item in self.queue if host in (item[0], item[1])]:
            self.queue.remove(item)
            self.parked.append(item)
        self._coordinator(HostLost(self.now, host, "partitioned"))

    def heal(self, host: str) -> None:
        self.cut.discard(host)
        for item in [item for item in self.parked if host in (item[0], item[1])]:
            self.parked.remove(item)
            self._send(*item)
        self._coordinator(HostBack(self.now, host))

    def move(self, rank: int) -> None:
        self._coordinator(MoveGang(self.now, rank, f"the owner asked to move rank {rank}"))

    def drain(self, limit: int = 20_000) -> None:
        """Deliver in order until nothing is in flight (or fail after `limit` messages)."""
        for _ in range(limit):
            if not self.queue:
                return
            self.deliver(0)
        raise AssertionError(f"still busy after {limit} messages: {self.coordinator.view()}")

    # Carrying out actions.

    def _coordinator(self, event: object, source: str = COORDINATOR) -> None:
        actions = self.coordinator.handle(event)
        message = getattr(event, "message", None)
        if isinstance(message, BarrierReport) and not any(isinstance(a, Refused) and a.message is message for a in actions):
            key = (message.epoch, message.rank, message.superstep)
            assert key not in self.applied, f"the report of {key} was applied twice"
            self.applied.add(key)
        for action in actions:
            if isinstance(action, Send):
                self._send(COORDINATOR, action.to, action.message)
            elif isinstance(action, Refused):
                self.refused.append(action)
            elif isinstance(action, Combine):
                assert self.output is None, "combined twice"
                self.output = heat.combine(self.params, [decode_plain(encode_plain(r, "result", MAX_RESULT_BYTES), "result")
                                                         for r in action.results])
            elif isinstance(action, GangFailed):
                raise AssertionError(action.reason)

    def _site(self, host: str, event: object) -> None:
        self._run(host, self.sites[host].handle(event))

    def _send(self, source: str, to, message: object) -> None:
        item = (source, to, message)
        if to in self.crashed or source in self.crashed:
            self._failed(item)
        elif to in self.cut or source in self.cut:
            self.parked.append(item)
        else:
            self.queue.append(item)

    def _failed(self, item: tuple) -> None:
        source, to, message = item
        if isinstance(message, Mail) and message.reply_to not in self.crashed:
            self._send(message.reply_to, message.reply_to, SendFailed(message))

    def _run(self, host: str, actions: list) -> None:
        for action in actions:
            if isinstance(action, Send):
                self._send(host, action.to, action.message)
            elif isinstance(action, LaunchMember):
                state = heat.start(self.params, action.rank, self.size) if action.state is None else action.state
                self.guests[host, action.rank] = (action.epoch, state)
            elif isinstance(action, KillMember):
                if self.guests.get((host, action.rank), (None,))[0] == action.epoch:
                    del self.guests[host, action.rank]
            elif isinstance(action, RunStep):
                self._step(host, action)
            elif isinstance(action, WriteCheckpoint):
                epoch, state = self.guests[host, action.rank]
                assert epoch == action.epoch
                data = MemberCheckpoint(action.rank, action.superstep, state, action.inbox).to_bytes()
                self._send(host, COORDINATOR, CheckpointReport("g", epoch, action.rank, action.superstep, data))
            else:
                raise AssertionError(f"unknown action {action!r}")

    def _step(self, host: str, run: RunStep) -> None:
        key = (run.epoch, run.rank, run.superstep)
        assert key not in self.runs, f"superstep {run.superstep} of rank {run.rank} ran twice in epoch {run.epoch}"
        self.runs[key] = list(run.inbox.items())
        epoch, state = self.guests[host, run.rank]
        assert epoch == run.epoch
        answer = check_superstep(heat.step(state, run.rank, self.size, run.inbox), run.rank, self.size, run.superstep)
        self.guests[host, run.rank] = (epoch, answer.state)
        move = None
        if run.check is not None:
            move = run.check.answer(tuple(self.rows.values()), self.size, host)
        result = heat.finish(answer.state, run.rank, self.size) if answer.done else None
        done = StepDone(run.rank, run.epoch, run.superstep, dict(answer.outbox), answer.done, move, result)
        self._send(host, ("guest", host), done)
