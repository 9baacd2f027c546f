"""The master's gang assignments: the trio driver of `master.gang`, one GangCoordinator per gang.

The node feeds it the merged resource table, hosts lost or back (membership, and a host's own
GangLost when its owner evicts or a member's guest dies), a host's GangHostState (its owner holds
its members, frees them, or finishes) and the gang messages that arrive;
each coordinator's actions are carried out here: messages are posted in order per host
(`cluster.gang_post`, a StartMember with its gang's spec), a Combine hands the members'
results to `on_done`, a GangFailed its reason to `on_failed`. A host that lost a member comes
back into a gang's choice once the table shows it accepting guests again after LOST_FOR
seconds. Every decision is the coordinator's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from frost_core.cluster.gang_post import GangPost
from frost_core.cluster.gang_site import Mail, ReleaseStep, StartMember, StopMember, TakeCheckpoint
from frost_core.cluster.messages import GangHostState, GangLost, GangSpec
from frost_core.master.gang import (
    Combine,
    GangCoordinator,
    GangFailed,
    GangView,
    GlobalCheckpoint,
    HostBack,
    HostFree,
    HostHeld,
    HostLost,
    LeaveHost,
    MoveGang,
    Received,
    Refused,
    TableChanged,
)
from frost_core.policies.gang_migration import CheckCadence
from frost_core.policies.views import NodeView

log = logging.getLogger("frost.gang")

LOST_FOR = 30.0
"""Seconds a host that lost a member of a gang stays out of that gang's choice (if the table shows it accepting)."""


@dataclass
class _Gang:
    coordinator: GangCoordinator
    spec: GangSpec
    on_done: Callable[[tuple], None]
    on_failed: Callable[[str], None]
    on_checkpoint: Callable[[GlobalCheckpoint], None]
    lost: dict[str, float]          # host -> when it lost a member of this gang


class GangRuns:
    """Gang assignments this node is master of; `post` must be served, `now` is the node's clock."""

    def __init__(self, post: GangPost, now: Callable[[], float], named: Callable[[str], str]) -> None:
        self._post = post
        self._now = now
        self._named = named
        self._gangs: dict[str, _Gang] = {}
        self._table: tuple[NodeView, ...] = ()

    def submit(self, gang_id: str, size: int, spec: GangSpec, *, on_done: Callable[[tuple], None],
               on_failed: Callable[[str], None], on_checkpoint: Callable[[GlobalCheckpoint], None],
               cadence: CheckCadence = CheckCadence(), x: float = 1.0, epoch: int = 0,
               checkpoint: GlobalCheckpoint | None = None, checkpoint_interval: float = 0.0) -> None:
        """Run a gang of `size` members: placed at once if the table has room, else as soon as it has
        (`epoch`, `checkpoint`, `checkpoint_interval`: see GangCoordinator). `on_checkpoint` gets each new
        global checkpoint."""
        coordinator = GangCoordinator(gang_id, size, cadence, x, epoch=epoch, checkpoint=checkpoint,
                                      memory=spec.memory_bytes, checkpoint_interval=checkpoint_interval,
                                      named=self._named)
        gang = self._gangs[gang_id] = _Gang(coordinator, spec, on_done, on_failed, on_checkpoint, {})
        self._apply(gang, TableChanged(self._now(), self._table))

    def cancel(self, gang_id: str) -> None:
        """Stop every member of the gang and forget it."""
        gang = self._gangs.pop(gang_id, None)
        if gang is not None:
            for rank, host in enumerate(gang.coordinator.hosts()):
                if host is not None:
                    self._post.post(host, StopMember(gang_id, rank, gang.coordinator.epoch + 1))

    def views(self) -> tuple[GangView, ...]:
        return tuple(gang.coordinator.view() for gang in self._gangs.values())

    def table_changed(self, table: Iterable[NodeView]) -> None:
        self._table = tuple(table)
        now = self._now()
        accepting = {view.node_id for view in self._table if view.accepting}
        for gang in list(self._gangs.values()):
            for host, since in list(gang.lost.items()):
                if host in accepting and now - since >= LOST_FOR:
                    del gang.lost[host]
                    self._apply(gang, HostBack(now, host))
            self._apply(gang, TableChanged(now, self._table))

    def host_lost(self, host: str, reason: str) -> None:
        """Membership says `host` died or left: every gang with a member there restarts elsewhere."""
        for gang in list(self._gangs.values()):
            self._lose(gang, host, reason)

    def host_back(self, host: str) -> None:
        for gang in list(self._gangs.values()):
            if gang.lost.pop(host, None) is not None:
                self._apply(gang, HostBack(self._now(), host))

    def move(self, gang_id: str, rank: int, reason: str) -> bool:
        """The owner's `move` of a member: the gang leaves its host at the next barrier. False: no such gang."""
        gang = self._gangs.get(gang_id)
        if gang is None:
            return False
        self._apply(gang, MoveGang(self._now(), rank, reason))
        return True

    def receive(self, peer: str, message: object) -> None:
        """A gang message for a coordinator here (a report, a checkpoint, mail to route, a GangLost) from `peer`."""
        gang = self._gangs.get(message.gang_id)  # type: ignore[attr-defined]
        if gang is None:
            log.info("gang %s: %s from %s for no gang here", message.gang_id, type(message).__name__, peer[:8])  # type: ignore[attr-defined]
        elif isinstance(message, GangHostState):
            self._host_state(gang, peer, message)
        elif isinstance(message, GangLost):
            if message.plugin_fault:
                self._fail(gang, message.reason)
            elif gang.coordinator.hosts()[message.rank:message.rank + 1] == (peer,) and message.epoch == gang.coordinator.epoch:
                self._lose(gang, peer, message.reason)
        else:
            self._apply(gang, Received(self._now(), message))

    def _host_state(self, gang: _Gang, host: str, news: GangHostState) -> None:
        """A member's host is held by its owner, free again, or leaving (its owner finishes)."""
        if news.state == "held":
            self._apply(gang, HostHeld(self._now(), host, news.reason))
        elif news.state == "free":
            self._apply(gang, HostFree(self._now(), host))
        else:
            self._apply(gang, LeaveHost(self._now(), host, news.reason))

    def send_failed(self, to: str, message: object, reason: str) -> None:
        """GangPost could not deliver to `to`: a member that cannot be started or released there is lost with it."""
        gang = self._gangs.get(getattr(message, "gang_id", ""))
        if gang is not None and isinstance(message, (StartMember, ReleaseStep, TakeCheckpoint)) \
                and message.epoch == gang.coordinator.epoch:
            self._lose(gang, to, f"is unreachable ({reason})")
        elif gang is not None and isinstance(message, Mail):
            log.info("gang %s: routed mail to %s not delivered: %s", gang.coordinator.gang_id, to[:8], reason)

    def _lose(self, gang: _Gang, host: str, reason: str) -> None:
        if host in gang.coordinator.hosts():
            log.info("gang %s: its member's host %s %s", gang.coordinator.gang_id, host[:8], reason)
        gang.lost[host] = self._now()
        self._apply(gang, HostLost(self._now(), host, reason))

    def _fail(self, gang: _Gang, reason: str) -> None:
        self.cancel(gang.coordinator.gang_id)
        gang.on_failed(reason)

    def _apply(self, gang: _Gang, event: object) -> None:
        before = gang.coordinator.checkpoint
        actions = gang.coordinator.handle(event)
        if gang.coordinator.checkpoint is not before:    # all p parts of a barrier are in: keep it before going on
            gang.on_checkpoint(gang.coordinator.checkpoint)
        for action in actions:
            if isinstance(action, Combine):
                gang.on_done(action.results)
            elif isinstance(action, GangFailed):
                gang.on_failed(action.reason)
            elif isinstance(action, Refused):
                log.info("gang %s refused %s: %s", gang.coordinator.gang_id, type(action.message).__name__, action.reason)
            else:
                self._post.post(action.to, action.message, spec=gang.spec)
