"""The peer node: wires transport, membership, guests, the master and the control socket together.

The node is the one narrow API between the UI (or the headless runner) and everything else:
`serve()` runs it, `snapshot()` reads its whole state as one frozen value, `send_nowait()`
hands it a command without ever blocking, and `execute()` runs a command and returns its
outcome (the control socket uses that). All of it runs on one trio thread, which may be a
guest run on Textual's loop, so nothing here does long synchronous work.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

import trio

from . import node_views
from .commands import (
    AddPlugin, CancelAssignment, Command, EvictGuests, FinishThenPause, MoveTask, PauseHosting,
    ResumeHosting, SaveSettings, SubmitAssignment,
)
from .config import Config, save_config
from .control import serve_control
from .errors import FrostError
from .events import EventLog
from .guest.supervisor import GuestEvent, GuestSettings, GuestSupervisor
from .hosting import HostingState, Intents, expire_intents, hosting_state
from .identity import load_node_id
from .master.scheduler import Capacity, LocalScheduler
from .addresses import advertised_host
from .master.store import MasterStore, NewUnit
from .membership import MemberEvent, MemberState, Membership, MembershipConfig, ResourceFigures
from .node_control import answer_control
from .machine import MachineState, MachineWatch
from .policies.owner import GuestAction
from .policies.transfer import summarize, thresholds, transfer_mode
from .policies.views import NodeView, PolicySettings
from .plugin_api import parse_params
from .plugin_calls import split_units
from .plugin_registry import PluginRegistry
from .snapshot import NodeSnapshot, ResourceSample
from .transport import open_transport
from .wire.security import ClusterKey

log = logging.getLogger("frost.node")

PUBLISH_INTERVAL = 0.1      # at most ten snapshots a second reach the UI
FIGURES_INTERVAL = 1.0      # how often local resources are measured and the history grows
HISTORY_LENGTH = 600        # ten minutes of one-second samples for the UI's chart
LEAVE_TIMEOUT = 1.0


def _membership_config(config: Config) -> MembershipConfig:
    return MembershipConfig(
        gossip_interval=config.get("gossip.interval"), fanout=config.get("gossip.fanout"),
        probe_interval=config.get("gossip.probe_interval"), probe_timeout=config.get("gossip.probe_timeout"),
        suspicion_multiplier=config.get("gossip.suspicion_multiplier"),
        suspicion_min=config.get("gossip.suspicion_min"), announce_interval=config.get("gossip.announce_interval"),
    )


class Node:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.paths = config.paths
        self.node_id = load_node_id(self.paths.data_dir)
        self.cluster_key = ClusterKey.load_or_create(config.cluster_key_file)
        self.events = EventLog()
        self.store = MasterStore(self.paths.database, node_id=self.node_id)
        self.registry = PluginRegistry(self.paths.data_dir)
        self.supervisor = GuestSupervisor(
            data_dir=self.paths.data_dir, settings=GuestSettings.from_config(self.config), on_event=self._on_guest_event
        )
        self.results_dir = self.paths.data_dir / "results"
        self.membership: Membership | None = None
        self.address = ""
        self.machine = MachineWatch(config, self.supervisor.guest_pids)
        self._machine_state: MachineState | None = None
        self._intents = Intents.load(self.store)
        self._guests_stopped = False
        self._evicting = 0
        self._history: list[ResourceSample] = []
        self._listener: Callable[[NodeSnapshot], None] | None = None
        self._commands_in, self._commands_out = trio.open_memory_channel[Command](64)
        self._changed = trio.Event()
        self._trio_token: trio.lowlevel.TrioToken | None = None
        self._scheduler = LocalScheduler(
            node_id=self.node_id, store=self.store, registry=self.registry, supervisor=self.supervisor,
            events=self.events, results_dir=self.results_dir, capacity=self._capacity, max_retries=lambda: self.config.get("guests.max_retries"),
            on_change=self.mark_changed,
        )
        self._snapshot = self._build_snapshot()

    # -- the API the UI and the control socket use ---------------------------------------

    def snapshot(self) -> NodeSnapshot:
        """The latest published snapshot (at most PUBLISH_INTERVAL old)."""
        return self._snapshot

    def fresh_snapshot(self) -> NodeSnapshot:
        """A snapshot built now, for a caller that must see the effect of a command it just ran."""
        return self._build_snapshot()

    def set_snapshot_listener(self, callback: Callable[[NodeSnapshot], None] | None) -> None:
        self._listener = callback

    def send_nowait(self, command: Command) -> None:
        """Queue a command without blocking; its outcome shows up in later snapshots and events.

        Safe to call from the UI between trio's steps: the trio token wakes trio's I/O wait at
        once, so a keypress is acted on in milliseconds rather than at the next timer.
        """
        if self._trio_token is None:
            self._enqueue(command)
        else:
            self._trio_token.run_sync_soon(self._enqueue, command)

    def _enqueue(self, command: Command) -> None:
        try:
            self._commands_in.send_nowait(command)
        except trio.WouldBlock:
            self.events.add("error", "too many commands at once; this one was dropped", severity="error",
                            title="Node busy")
            self.mark_changed()

    async def execute(self, command: Command) -> Any:
        """Carry out one command now and return its outcome; FrostError says why it could not."""
        try:
            return await self._execute(command)
        finally:
            self.mark_changed()

    def mark_changed(self) -> None:
        self._changed.set()

    @property
    def intents(self) -> Intents:
        return self._intents

    # -- running ---------------------------------------------------------------------------

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Run the node until cancelled; on the way out, tell peers we leave and keep guests checkpointed."""
        config = self.config
        self._trio_token = trio.lowlevel.current_trio_token()
        self._sync_guests()  # a pause the owner asked for before a restart holds from the first guest on
        try:
            broadcast = config.get("node.broadcast_address")
            async with open_transport(
                host=config.get("node.listen_host"), port=config.get("node.port"),
                broadcast_address=(broadcast, 0) if broadcast else None,
                key=self.cluster_key, node_id=self.node_id,
            ) as transport:
                advertised = (advertised_host(config), transport.local_address[1])
                self.address = f"{advertised[0]}:{advertised[1]}"
                self.membership = Membership(
                    node_id=self.node_id, name=config.node_name, address=advertised,
                    config=_membership_config(config), rng=random.Random(), on_event=self._on_membership_event,
                    seeds=config.seeds, figures=self._figures(),
                )
                async with trio.open_nursery() as nursery:
                    await nursery.start(self.membership.serve, transport)
                    await nursery.start(serve_control, self.paths.control_socket, self._control)
                    nursery.start_soon(self._run_commands)
                    nursery.start_soon(self._watch_resources)
                    nursery.start_soon(self._start_hosting, nursery)
                    nursery.start_soon(self._publish_snapshots)
                    self.events.add("join", f"node {config.node_name} started at {self.address}")
                    task_status.started()
                    try:
                        await trio.sleep_forever()
                    finally:
                        with trio.CancelScope(shield=True), trio.move_on_after(LEAVE_TIMEOUT):
                            await self.membership.leave()
        finally:
            self.store.close()

    async def _run_commands(self) -> None:
        async for command in self._commands_out:
            try:
                await self._execute(command)
            except FrostError as error:
                self.events.error(error)
            self.mark_changed()

    async def _execute(self, command: Command) -> Any:
        now = time.time()
        match command:
            case PauseHosting(until=until):
                self._set_intents(Intents(paused=True, paused_until=until))
                self.events.add("pause", self._hosting(now).reason)
                return self._hosting(now).reason
            case ResumeHosting():
                self._set_intents(Intents())
                self.events.add("resume", "the owner resumed hosting")
                self._scheduler.wake()
                return "hosting resumed"
            case FinishThenPause():
                self._set_intents(Intents(finishing=True))
                self.events.add("pause", "finishing the current guests, then pausing")
                return "taking nothing new; pausing once the current guests finish"
            case EvictGuests(task_id=task_id):
                return await self._evict(task_id)
            case SubmitAssignment(plugin=plugin, params=params):
                return await self._submit(plugin, params)
            case CancelAssignment(assignment_id=assignment_id):
                record = self.store.cancel_assignment(assignment_id)
                await self.supervisor.cancel_assignment(assignment_id)
                self.events.add("assignment", f"assignment {assignment_id} cancelled")
                return record.id
            case AddPlugin(path=path):
                info = await self.registry.add_async(path)
                if info.ok:
                    self.events.add("plugin", f"plugin {info.name} {info.version} added from {path}")
                else:
                    self.events.add("plugin", f"plugin at {path} is broken: {info.error}", severity="error",
                                    title="Broken plugin")
                return info
            case SaveSettings(values=values):
                self.config = self.config.replace(**{k.replace(".", "__"): v for k, v in values.items()})
                save_config(self.config)
                self.supervisor.update_settings(GuestSettings.from_config(self.config))
                self.machine.update_settings(self.config)
                self._scheduler.wake()
                self.events.add("settings", f"saved {len(values)} setting(s) to {self.paths.config_file}")
                return "saved"
            case MoveTask():
                raise FrostError("moving a unit to another peer arrives with migration (issue 4)",
                                 title="Not available yet")
        raise FrostError(f"unknown command {command!r}")

    async def _submit(self, plugin_name: str, raw_params: dict[str, Any]) -> dict[str, Any]:
        if not self.registry.plugins():
            await self.registry.scan_async()
        info = self.registry.get(plugin_name)
        params = parse_params(info, raw_params)
        units = await split_units(info, params)
        assignment_id = self.store.create_assignment(
            plugin=info.name, plugin_version=info.version, plugin_hash=info.hash, params=params,
            units=[NewUnit(data=u.data, memory_bytes=u.memory_bytes, cost=u.cost) for u in units],
        )
        self.events.add("assignment", f"assignment {assignment_id} submitted: {len(units)} unit(s) of {info.name}")
        self._scheduler.wake()
        return {"id": assignment_id, "units": len(units)}

    async def _evict(self, task_id: str | None) -> str:
        """Checkpoint now and send the guests away; their units wait in their master's queue."""
        hold = time.time() + self.config.get("owner.evict_hold")
        self._set_intents(Intents(**{**vars(self._intents), "evict_hold_until": hold}))
        self._evicting += 1
        self.mark_changed()
        try:
            evicted = await self.supervisor.evict(task_id)
            with trio.move_on_after(2.0):
                await self._scheduler.wait_released(evicted)
        finally:
            self._evicting -= 1
        message = f"evicted {len(evicted)} guest(s)"
        self.events.add("evict", message)
        return message

    def _set_intents(self, intents: Intents) -> None:
        self._intents = intents
        intents.save(self.store)
        self._sync_guests()
        self.mark_changed()

    def _sync_guests(self) -> None:
        """Stop or continue every guest so they run exactly when the owner (intent or activity) lets them."""
        owner = self._machine_state.decision if self._machine_state else None
        should_run = not self._intents.paused and (owner is None or owner.action is GuestAction.RUN)
        if should_run and self._guests_stopped:
            self.supervisor.resume_all()
            self._guests_stopped = False
        elif not should_run and not self._guests_stopped:
            self.supervisor.pause_all()
            self._guests_stopped = True

    # -- background loops --------------------------------------------------------------------

    async def _watch_resources(self) -> None:
        """Every second: measure, let the owner policy decide, expire timed intents, gossip the figures.

        The measurement is scheduled here at normal priority even though it measures what a
        lowest-priority guest receives: FROST's first runs reacted late because the measuring
        thread itself ran at guest priority.
        """
        await self.machine.start()
        while True:
            now = time.time()
            expired = expire_intents(self._intents, now)
            if expired != self._intents:
                if self._intents.paused and not expired.paused:
                    self.events.add("resume", "the timed pause ended")
                self._set_intents(expired)
                self._scheduler.wake()
            if self._intents.finishing and self._scheduler.running_count == 0:
                self._set_intents(Intents(paused=True))
                self.events.add("pause", "the last guest finished; hosting is paused")
            state = await self.machine.sample()
            await self._follow_owner(state)
            figures = self._figures()
            self._history.append(ResourceSample(
                at=now, available=figures.available, owner_cpu_percent=state.reading.owner_cpu_percent,
                guest_cpu_percent=state.reading.guest_cpu_percent,
            ))
            del self._history[:-HISTORY_LENGTH]
            if self.membership is not None:
                self.membership.set_local_figures(figures)
            self.mark_changed()
            await trio.sleep(FIGURES_INTERVAL)

    async def _follow_owner(self, state: MachineState) -> None:
        """Carry out the owner policy: suspend at once, evict when it lasts, resume after quiet."""
        before = self._machine_state.decision.action if self._machine_state else GuestAction.RUN
        self._machine_state = state
        action = state.decision.action
        if action is not before:
            severity = "info" if action is GuestAction.RUN else "warning"
            self.events.add("owner", state.decision.explain(), severity=severity)
        self._sync_guests()
        if action is GuestAction.EVICT and self._scheduler.running_count and not self._evicting:
            await self._evict(None)
        if action is GuestAction.RUN and before is not GuestAction.RUN:
            self._scheduler.wake()

    async def _start_hosting(self, nursery: trio.Nursery) -> None:
        """Know the plugins before placing any unit: a queued unit names its plugin by hash."""
        await self.registry.scan_async()
        for info in self.registry.plugins():
            if not info.ok:
                self.events.add("plugin", f"plugin at {info.path} is broken: {info.error}", severity="warning",
                                title="Broken plugin")
        await nursery.start(self._scheduler.serve)
        self.mark_changed()

    async def _publish_snapshots(self) -> None:
        """Rebuild the snapshot after changes, at most every PUBLISH_INTERVAL: a burst is one redraw."""
        while True:
            await self._changed.wait()
            self._changed = trio.Event()
            self._snapshot = self._build_snapshot()
            if self._listener is not None:
                self._listener(self._snapshot)
            await trio.sleep(PUBLISH_INTERVAL)

    async def _control(self, verb: str, args: dict[str, Any]) -> Any:
        return await answer_control(self, verb, args)

    # -- figures and views -----------------------------------------------------------------

    def _hosting(self, now: float) -> HostingState:
        owner = self._machine_state.decision if self._machine_state else None
        if owner is None:
            owner_reason = "measuring this machine" if not self.machine.started else None
        else:
            owner_reason = None if owner.action is GuestAction.RUN and owner.accepting else owner.reason
        return hosting_state(
            self._intents, now=now, guests=self._scheduler.running_count, evicting=self._evicting > 0,
            owner_active_reason=owner_reason,
        )

    def _capacity(self) -> Capacity:
        return Capacity(
            accepts_guests=self._hosting(time.time()).accepts_guests,
            cpus=self.config.guest_cpus, memory_pool_bytes=self.config.memory_pool_bytes,
        )

    def _figures(self) -> ResourceFigures:
        """What this node gossips: the measured availability (zero while it takes no guests)."""
        hosting = self._hosting(time.time())
        state = self._machine_state
        extremities = self.machine.extremities
        available = state.reading.available if state is not None and hosting.accepts_guests else 0.0
        memory_used = sum(f.memory_bytes for f in self.supervisor.figures())
        return ResourceFigures(
            available=round(available, 3),
            idle_extremity=extremities.idle if extremities else 0.0,
            heavy_extremity=extremities.heavy if extremities else 0.0,
            cpus=self.config.guest_cpus, free_memory=max(0, self.config.memory_pool_bytes - memory_used),
            guests=self._scheduler.running_count, mode=self.transfer_view()[0],
        )

    def transfer_view(self) -> tuple[str, float, float, float]:
        """(transfer mode, system average, lower, upper threshold) from the gossiped table (FROST 5.2)."""
        if self.membership is None:
            return "neutral", 0.0, 0.0, 0.0
        table = [
            NodeView(node_id=r.node_id, available=r.figures.available, guests=r.figures.guests,
                     cpus=max(r.figures.cpus, 1), idle_extremity=r.figures.idle_extremity or 1.0,
                     heavy_extremity=r.figures.heavy_extremity)
            for r in self.membership.members() if r.state == MemberState.ALIVE
        ]
        if not table:
            return "neutral", 0.0, 0.0, 0.0
        system = summarize(table)
        lower, upper = thresholds(system.average, PolicySettings().band)
        return transfer_mode(system).value, system.average, lower, upper

    def _on_guest_event(self, event: GuestEvent) -> None:
        severity = event.level if event.level in ("warning", "error") else "info"
        self.events.add(event.kind, f"{event.task_id}: {event.message}", severity=severity)
        self.mark_changed()

    def _on_membership_event(self, event: MemberEvent) -> None:
        record = event.record
        where = f"{record.name} ({record.node_id[:8]}) at {record.address[0]}:{record.address[1]}"
        text = {"joined": f"{where} joined", "alive": f"{where} is alive again", "suspect": f"{where} is suspected",
                "dead": f"{where} is dead", "left": f"{where} left the cluster"}[event.kind]
        kind = {"joined": "join", "left": "leave"}.get(event.kind, event.kind)
        self.events.add(kind, text, severity="warning" if event.kind in ("suspect", "dead") else "info")
        self.mark_changed()

    def _build_snapshot(self) -> NodeSnapshot:
        now = time.time()
        return node_views.build_snapshot(self, self._hosting(now), tuple(self._history), now=now)
