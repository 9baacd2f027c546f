"""Turns the node's live parts into the frozen views of a NodeSnapshot.

Kept apart from wiring.py so the node wires and decides, and this module only describes; it
reads the node through the `NodeParts` protocol, never the Node class, so it does not import it.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from frost_core.api.wording import said_until
from frost_core.policies.intents import HostingState, Intents
from frost_core.master import verification
from frost_core.master.results import exported_files_folder, exported_path
from frost_core.master.store import SETTLED, AssignmentRecord, Listed, UnitTally
from frost_core.api.snapshot import (
    AssignmentView, GangMemberView, GangView, GuestView, HostingView, NodeSnapshot, ParamView, PeerView, PluginView,
    ResourceSample, SNAPSHOT_UNITS, UnitView,
)
from frost_core.master.gang import GangView as GangCoordinatorView
from frost_core.plugin.registry import preferred

if TYPE_CHECKING:
    from frost_core.cluster.balancer import Balancer
    from frost_core.config import Config
    from frost_core.events import EventLog
    from frost_core.guest.supervisor import GuestSupervisor
    from frost_core.ledger.service import LedgerService
    from frost_core.master.store import MasterStore
    from frost_core.measure.desk import DeskWatch
    from frost_core.measure.machine import MachineWatch
    from frost_core.membership import Membership
    from frost_core.node.sleep import SleepWatch
    from frost_core.plugin.registry import PluginRegistry
    from frost_core.wire.security import ClusterKey

MAX_EVENTS_IN_SNAPSHOT = 500


class NodeParts(Protocol):
    """What the views read of a running node (`wiring.Node` is the one implementation)."""

    node_id: str
    address: str
    config: Config
    cluster_key: ClusterKey
    supervisor: GuestSupervisor
    machine: MachineWatch
    balancer: Balancer
    membership: Membership | None
    store: MasterStore
    registry: PluginRegistry
    events: EventLog
    results_dir: Path
    sleep_watch: SleepWatch
    desk: DeskWatch
    ledger: LedgerService
    settled_views: SettledViews

    @property
    def intents(self) -> Intents: ...

    def transfer_view(self) -> tuple[str, float, float, float]: ...

    def live_progress(self) -> dict[str, float]: ...

    def unit_etas(self) -> dict[str, float]: ...

    def unit_waiting(self) -> dict[str, str]: ...

    def unit_states(self) -> dict[str, str]: ...

    def unit_leaving(self) -> dict[str, float]: ...

    def quarantined(self) -> dict[str, str]: ...

    def gang_views(self) -> dict[str, GangCoordinatorView]: ...


def build_snapshot(node: NodeParts, hosting: HostingState, history: tuple[ResourceSample, ...], *, now: float,
                   assignments: bool = True) -> NodeSnapshot:
    """The node as the UI shows it; `assignments=False` leaves them out, for a reply that does not show them."""
    guests = node.supervisor.figures()
    memory_used = sum(g.memory_bytes for g in guests)
    mode, average, lower, upper = node.transfer_view()
    live = node.live_progress()
    names = peer_names(node)
    explanation = f"{hosting.state}: {hosting.reason}. Owner policy: {node.machine.owner.explain()}"
    return NodeSnapshot(
        node_id=node.node_id,
        name=node.config.node_name,
        address=node.address,
        cluster_join_code=node.cluster_key.to_join_code(),
        taken_at=now,
        hosting=HostingView(
            state=hosting.state, reason=hosting.reason, paused_until=node.intents.paused_until,
            finishing=node.intents.finishing, transfer_mode=mode, system_average=average,
            lower_threshold=lower, upper_threshold=upper, memory_pool_bytes=node.desk.memory_pool_bytes,
            memory_used_bytes=memory_used, guest_cpus=node.config.guest_cpus,
            balance=node.balancer.last.why if node.balancer.last else "",
            owner=node.machine.last.decision.lines() if node.machine.last else (),
            not_owner=node.machine.accounting(),
            reach=node.reach_status(),
            presence=node.desk.presence.last.describe(), presence_brief=node.desk.presence.last.brief(),
            sleep=node.sleep_watch.line, sleep_brief=node.sleep_watch.brief,
            isolation=node.supervisor.isolation().lines(),
        ),
        history=history,
        ledger=node.ledger.view,
        peers=peer_views(node),
        guests=tuple(
            GuestView(
                task_id=g.task_id, assignment_id=g.assignment_id, plugin=g.plugin, origin=_peer_name(node, g.origin),
                state=g.state, progress=g.progress, cpu_seconds=g.cpu_seconds, wall_seconds=g.wall_seconds,
                since_checkpoint_seconds=g.since_checkpoint_seconds,
                cpu_since_checkpoint_seconds=g.cpu_since_checkpoint_seconds, checkpoint_bytes=g.checkpoint_bytes,
                memory_bytes=g.memory_bytes, explanation=explanation,
            )
            for g in guests
        ),
        assignments=assignment_views(node, now=now, live=live, names=names, alive=live_node_ids(node))
        if assignments else (),
        plugins=plugin_views(node.registry.plugins()),
        events=node.events.recent()[-MAX_EVENTS_IN_SNAPSHOT:],
        settings=dict(node.config.values),
    )


def peer_views(node: NodeParts) -> tuple[PeerView, ...]:
    if node.membership is None:
        return ()
    views = []
    members = node.membership.members()
    names = display_names(members)
    quarantined = node.quarantined()
    for record in members:
        figures = record.figures
        views.append(PeerView(
            node_id=record.node_id, name=names[record.node_id], address=f"{record.address[0]}:{record.address[1]}",
            state=record.state.name.lower(), available=figures.available, cpus=figures.cpus,
            free_memory=figures.free_memory, guests=figures.guests, mode=figures.mode,
            last_seen=time.time() if record.node_id == node.node_id else node.membership.last_heard(record.node_id),
            rtt_ms=node.membership.rtt_ms(record.node_id), idle_extremity=figures.idle_extremity,
            heavy_extremity=figures.heavy_extremity, incarnation=record.incarnation,
            protocol_version=record.protocol_version, is_self=record.node_id == node.node_id,
            quarantined=quarantined.get(record.node_id, ""),
        ))
    return tuple(sorted(views, key=lambda view: (not view.is_self, view.name)))


def assignment_view(
    record: AssignmentRecord, *, now: float, results_dir: Path, live: Mapping[str, float] | None = None,
    names: Mapping[str, str] | None = None, etas: Mapping[str, float] | None = None,
    waiting: Mapping[str, str] | None = None, reported: Mapping[str, str] | None = None,
    gangs: Mapping[str, GangCoordinatorView] | None = None, tally: UnitTally | None = None,
    alive: Collection[str] = (), leaving: Mapping[str, float] | None = None,
) -> AssignmentView:
    """`live` maps task ids of guests running here to their current progress: the store only
    learns a unit's progress when it completes, the screen should see it move. `names` maps
    node ids to peer names, so the screen says where a unit runs in words. `reported` is each
    running unit's state as its host last said: one it reports paused or suspended says so
    (`UnitView.reported`), the screen shows that rather than "running". A queued unit shows no host: the one it had
    may be dead and is not where it will run. `tally`: of all the units, where `record.units` are some of them
    (`MasterStore.listing`); None: `record.units` are all of them. `alive`: the ids of the live nodes, this one
    included: a unit held on a paused desk can be moved only where another one is. `leaving`: when a unit held on a
    paused desk leaves it by itself, as its host said (`MasterScheduler.leaving`)."""
    live = live or {}
    names = names or {}
    etas = etas or {}
    waiting = waiting or {}
    reported = reported or {}
    tally = tally or UnitTally.of(record.units)
    units = tuple(
        UnitView(index=u.index, task_id=u.task_id, state=u.state,
                 host="" if u.state == "queued" else u.host,
                 progress=live.get(u.task_id, u.progress) if u.state == "running" else u.progress,
                 moves=u.moves, failures=u.failures, error=u.error,
                 eta_seconds=etas.get(u.task_id) if u.state == "running" else None,
                 **unit_words(u.state, u.host, u.task_id, names=names, waiting=waiting, reported=reported,
                              alive=alive, leaving=leaving or {}, now=now))
        for u in record.units
    )
    running = {f"{record.id}.{index}": stored for index, stored in tally.running}
    if tally.count:
        progress = (tally.progress + sum(live[task] - stored for task, stored in running.items() if task in live)) / tally.count
    else:
        progress = 1.0 if record.state == "done" else 0.0
    eta = None
    stalled = (tally.count > tally.done + tally.failed and not tally.queued
               and all(_standing_still("running", reported.get(task)) in STOPPED_BY_OWNER for task in running))
    if record.state == "running" and 0 < progress < 1 and not stalled:
        elapsed = now - record.created_at
        eta = elapsed * (1 - progress) / progress
    return AssignmentView(
        id=record.id, plugin=record.plugin, state=record.state, progress=progress, created_at=record.created_at,
        finished_at=record.finished_at, eta_seconds=eta, params=dict(record.params),
        units=units, unit_count=tally.count, units_done=tally.done, moves=tally.moves,
        result_media_type=record.result_media_type, result_filename=record.result_filename,
        result_path=str(exported_path(results_dir, record.id, record.result_filename))
        if record.state == "done" and record.result_filename else None,
        files_folder=str(exported_files_folder(results_dir, record.id)) if record.state == "done" else None,
        error=record.error,
        wasted_seconds=record.wasted_seconds, waste=dict(record.waste),
        verify=record.verify, verified=tally.verified,
        verification="" if record.gang_members else verification.summary(record.verify, tally.count, tally.verified),
        gang=gang_view((gangs or {}).get(record.id), names), gang_members=record.gang_members,
    )


def assignment_views(node: NodeParts, *, now: float, live: Mapping[str, float],
                     names: Mapping[str, str], alive: Collection[str]) -> tuple[AssignmentView, ...]:
    """Every assignment as a screen lists it (`MasterStore.listing`), a settled one's view made once: a snapshot's,
    and `ListAssignments`' answer."""
    etas, waiting, reported, gangs = node.unit_etas(), node.unit_waiting(), node.unit_states(), node.gang_views()
    leaving = node.unit_leaving()

    def make(listed: Listed) -> AssignmentView:
        return assignment_view(listed.record, now=now, results_dir=node.results_dir, live=live, names=names, etas=etas,
                               waiting=waiting, reported=reported, gangs=gangs, tally=listed.tally, alive=alive,
                               leaving=leaving)

    return tuple(make(listed) if listed.record.id in gangs   # (a gang's coordinator view changes beside its record)
                 else node.settled_views.view(listed.record, names, functools.partial(make, listed))
                 for listed in node.store.listing(SNAPSHOT_UNITS))


class SettledViews:
    """The views of SETTLED assignments, each made once and kept while its record and the names of its hosts are
    the same: with three finished 10,000-unit sweeps behind it, a node made 30,000 unit views for every snapshot
    (90-110 ms on its event loop), and the attached UI decoded them all again (`attach_protocol`)."""

    def __init__(self) -> None:
        self._made: dict[str, tuple[AssignmentRecord, dict[str, str], AssignmentView]] = {}

    def view(self, record: AssignmentRecord, names: Mapping[str, str],
             make: Callable[[], AssignmentView]) -> AssignmentView:
        """`make()`'s view of `record`, or the one made for it before (the store hands out the same record
        object until the record changes)."""
        if record.state not in SETTLED:
            return make()
        made = self._made.get(record.id)
        if made is not None and made[0] is record and all(names.get(host, host[:8]) == name
                                                          for host, name in made[1].items()):
            return made[2]
        hosts = {u.host for u in record.units if u.host}
        self._made[record.id] = (record, {host: names.get(host, host[:8]) for host in hosts}, view := make())
        return view


def gang_view(gang: GangCoordinatorView | None, names: Mapping[str, str]) -> GangView | None:
    """A gang coordinator's view with host names, for the snapshot (None: not a gang, or not mastered here)."""
    if gang is None:
        return None
    last = gang.last_checkpoint
    return GangView(
        phase=gang.phase, reason=gang.reason, superstep=gang.superstep, epoch=gang.epoch,
        members=tuple(GangMemberView(rank=m.rank, host=m.host or "", host_name=names.get(m.host, m.host[:8]) if m.host else "",
                                     superstep=m.superstep, at_barrier=m.at_barrier, waited_seconds=m.waited,
                                     moves=m.moves) for m in gang.members),
        checkpoint_superstep=None if last is None else last.superstep, checkpoint_at=None if last is None else last.at,
        checkpoint_bytes=0 if last is None else last.size, moves=gang.moves, restarts=gang.restarts,
    )


STOPPED_BY_OWNER = ("paused", "suspended")


def unit_words(state: str, host: str, task_id: str, *, names: Mapping[str, str], waiting: Mapping[str, str],
               reported: Mapping[str, str], alive: Collection[str], leaving: Mapping[str, float] | None = None,
               now: float = 0.0) -> dict[str, str]:
    """What a unit's row says beside its stored fields (`UnitView`'s reported, host_name and waiting): a search of
    the units (`FindUnits`) matches what the screen shows. `alive`: the live nodes' ids (`live_node_ids`);
    `leaving`: when a unit held on a paused desk leaves it by itself (wall time; `now` says it in words)."""
    standing_still = _standing_still(state, reported.get(task_id))
    host_name = names.get(host, host[:8]) if host and state != "queued" else ""
    movable = any(node_id != host for node_id in alive)
    leaves = said_until(leaving[task_id], now) if leaving and task_id in leaving and now else ""
    return {"reported": standing_still, "host_name": host_name,
            "waiting": waiting.get(task_id, "") if state == "queued"
            else _held_by(standing_still, host_name, movable, leaves)}


def _held_by(standing_still: str, host_name: str, movable: bool, leaves: str = "") -> str:
    """Who holds a placed unit that makes no progress, for the why column (the state column says only "paused").
    A paused desk sends its guests on once the pause lasts (`owner.pause_evict_after`, the host's setting; `leaves`:
    at what time, as the host said) and the remedy is offered, only where a live node besides it could take the unit."""
    if standing_still == "paused":
        later = f"at {leaves}" if leaves else "if the pause lasts"
        elsewhere = f", or on another peer {later} (or move it there now)" if movable else ""
        return f"{host_name}'s owner paused its guests: it goes on when they resume{elsewhere}"
    if standing_still == "suspended":
        return f"{host_name}'s owner is busy: it goes on once they are done, or moves if that lasts"
    if standing_still == "waiting":
        return f"placed ahead on {host_name}: it starts when a CPU there frees"
    return ""


def _standing_still(stored: str, reported: str | None) -> str:
    """Why a running unit makes no progress, as its host reports it: paused or suspended by the owner, or
    waiting (placed ahead of a busy CPU, it starts when one frees); "" while it runs."""
    return reported if stored == "running" and reported in (*STOPPED_BY_OWNER, "waiting") else ""


def plugin_views(infos: Iterable) -> tuple[PluginView, ...]:
    """Every plugin listed, each working copy that `submit` passes over for another of its name marked with the
    hash of the one it runs (an owner who added a plugin twice sees which code runs)."""
    infos = tuple(infos)
    runs = {name: preferred(infos, name) for name in {info.name for info in infos}}
    return tuple(plugin_view(info, superseded_by=runs[info.name].hash
                             if info.ok and runs[info.name] is not info else "") for info in infos)


def plugin_view(info, *, superseded_by: str = "") -> PluginView:
    return PluginView(
        name=info.name, version=info.version, hash=info.hash, source=info.source, path=info.shown_path, ok=info.ok,
        error=info.error, description=info.description,
        params=tuple(
            ParamView(name=p.name, kind=p.kind.__name__ if isinstance(p.kind, type) else str(p.kind),
                      default=p.default, help=p.help, minimum=p.minimum, maximum=p.maximum,
                      choices=tuple(p.choices or ()))
            for p in info.params
        ),
        gang=info.gang,
        superseded_by=superseded_by,
    )


def display_names(members: Iterable) -> dict[str, str]:
    """Node id -> the name the owner sees and types: the member's own name, or NAME@HOST:PORT for
    names two members share (every node on one machine is named after the host by default).

    A node that left or died keeps its row for a while; a machine restarted with a fresh identity
    then shares its name with its own ghost. The live one keeps the plain name, the ghost is qualified.
    """
    members = list(members)
    active = Counter(record.name for record in members if record.is_active)
    everyone = Counter(record.name for record in members)

    def shared(record) -> bool:
        return (active if record.is_active else everyone)[record.name] > 1

    return {record.node_id: f"{record.name}@{record.address[0]}:{record.address[1]}" if shared(record)
            else record.name for record in members}


def live_node_ids(node: NodeParts) -> frozenset[str]:
    """The ids of the nodes alive as this one knows them, itself included: where a unit could be moved to."""
    if node.membership is None:
        return frozenset({node.node_id})
    return frozenset({node.node_id} | {record.node_id for record in node.membership.members()
                                       if record.state.name.lower() == "alive"})


def peer_names(node: NodeParts) -> dict[str, str]:
    """Node id -> peer name for every member this node knows, itself included; one that is dead or
    left says so ("fermat (dead)"), so a unit still shown on it until it is placed again is not taken
    for running there."""
    names = {node.node_id: node.config.node_name}
    if node.membership is not None:
        members = node.membership.members()
        names.update(display_names(members))
        for record in members:
            if record.state.name.lower() in ("dead", "left"):
                names[record.node_id] += f" ({record.state.name.lower()})"
    return names


def _peer_name(node: NodeParts, node_id: str) -> str:
    if node_id == node.node_id:
        return f"{node.config.node_name} (me)"
    if node.membership is not None:
        return display_names(node.membership.members()).get(node_id, node_id[:8])
    return node_id[:8]
