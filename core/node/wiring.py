"""The peer node: wires transport, membership, guests, the master and the control socket together.

The node is the one narrow API between the UI (or the headless runner) and everything else:
`serve()` runs it, `snapshot()` reads its whole state as one frozen value, `send_nowait()`
hands it a command without ever blocking, `execute()` runs a command and returns its typed
reply, and `ask()` answers a typed query (the control socket uses those two). All of it runs
on one trio thread, which may be a guest run on Textual's loop, so nothing here does long
synchronous work.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import trio

import frost_core.node.views as node_views
from frost_core.api.wording import counted, peer_named
from frost_core.storage.checkpoints import CheckpointStore
from frost_core.storage.disk_watch import MIB, RETRY_AFTER, DiskWatch
from frost_core.cluster.host import Capacity, Hosted, HostService, HostSettings, Stay
from frost_core.cluster.files import MAX_INPUTS, InputFiles
from frost_core.cluster.links import Links
from frost_core.cluster.migration import Migrator
from frost_core.cluster.balancer import BalanceDecision, BalanceInputs, Balancer, unit_view
from frost_core.cluster.messages import GangSpec, Verdict
from frost_core.cluster.outbox import Outbox
from frost_core.cluster.replication import HeldReplicas
from frost_core.api.commands import (
    AddPlugin, CancelAssignment, Command, EvictGuests, FinishThenPause, HandOffGuests, JoinCluster, Measurement,
    MoveTask, PauseHosting, ClearQuarantine, Remeasure, RemovePlugin, ResumeHosting, SaveSettings, SubmitAssignment,
    Submitted,
)
from frost_core.config import Config, parse_address, save_config, waiting_for_restart
from frost_core.node.attach_protocol import AttachRequest
from frost_core.node.attach_service import serve_attached
from frost_core.node.control import Handler, Request, serve_control
from frost_core.node.joining import what_holds_back
from frost_core.api.node_api import EMBEDDED, Link
from frost_core.wire.channel import Channel
from frost_core.api.errors import ConfigError, FrostError, PluginError, StorageError
from frost_core.events import EventLog
from frost_core.guest.gang_member import MemberGuest, MemberSpec, open_member
from frost_core.guest.supervisor import GuestSupervisor
from frost_core.guest.views import GuestEvent, GuestSettings
from frost_core.policies.intents import (
    HostingState, Intents, dated_pause, expire_intents, hosting_state, paused_guests_leave_at, send_away,
)
from frost_core.node.identity import load_node_id, load_node_key, load_owner_token, submitter_id
from frost_core.ledger.book import Ledger
from frost_core.ledger.service import LedgerService
from frost_core.node.gangs import Gangs
from frost_core.node.pace import SnapshotPace
from frost_core.node.remote_control import serve_remote_control
from frost_core.node.sleep import NOT_YET, SleepWatch, watch_sleep
from frost_core.master.gang import GangView as GangCoordinatorView, GlobalCheckpoint
from frost_core.master.gang_checkpoints import GangCheckpoints
from frost_core.master.scheduler import MasterScheduler, MasterSettings
from frost_core.node.addresses import LOOK_AGAIN, advertised_host, moved_to
from frost_core.master.store import MasterStore, NewUnit, split_task_id
from frost_core.master.usage import UsageBook
from frost_core.master.verification import choose_checked
from frost_core.membership import MemberEvent, MemberState, Membership, MembershipConfig, ResourceFigures
from frost_core.membership.ticks import sleep_to_tick
from frost_core.node.answers import answer
from frost_core.api.queries import Query
from frost_core.measure.desk import DeskWatch
from frost_core.measure.machine import MachineState, MachineWatch
from frost_core.policies.desk import beyond_pool, capped_offer
from frost_core.policies.fair_share import ShareSettings, submitter_usage
from frost_core.policies.owner import GuestAction, format_span
from frost_core.policies.reciprocity import submitter_node
from frost_core.policies.gang_migration import CheckCadence, cadence_of, describe_cadence
from frost_core.policies.balance import Step, evict_destinations, unit_estimate
from frost_core.policies.bandwidth import Bandwidths
from frost_core.policies.selection import costliest_move
from frost_core.policies.transfer import summarize, thresholds, transfer_mode
from frost_core.policies.views import NodeView, PolicySettings
from frost_core.plugin.api import declared_inputs, parse_params
from frost_core.plugin.calls import GangDemand, combine_output, gang_demand, split_units
from frost_core.plugin.spare import SpareWorker
from frost_core.plugin.plain import decode_plain, encode_plain
from frost_core.plugin.limits import check_file_name
from frost_core.cluster.code_shipping import fetch_plugin, install_plugin_code
from frost_core.plugin.registry import PluginInfo, PluginRegistry
from frost_core.api.snapshot import NodeSnapshot, ResourceSample
from frost_core.wire.transport import open_transport
from frost_core.wire.security import ClusterKey

log = logging.getLogger("frost.node")

FIGURES_INTERVAL = 1.0      # how often local resources are measured and the history grows
HOSTING_PUBLISH_GAP = 0.02  # hosting changes within this of a publication go out together, after it
HISTORY_LENGTH = 600        # ten minutes of one-second samples for the UI's chart
LEAVE_TIMEOUT = 1.0
JOINING = ("the nodes of a cluster share one key: `frost-tui key show` on one prints its code, "
           "`frost-tui key set CODE` on the other (a running node switches at once; or Join on its Settings tab)")
"""How to mend a refusal for another cluster key, told beside it: "0 alive" alone leaves the owner guessing."""
SPENT_TIMEOUT = 2.0         # on the way out, for the masters to hear what the runs that ended here used
EVICT_WAIT = 5.0            # an evict command returns once its units are on their way, or after this


class Node:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.paths = config.paths
        self.node_id = load_node_id(self.paths.data_dir)
        self.cluster_key = ClusterKey.load_or_create(config.cluster_key_file)
        self.events = EventLog()
        self.disk = DiskWatch(self.paths.data_dir, self.events,
                              floor=lambda: self.config.get("guests.min_free_disk_mb") * MIB)
        self.submitter = submitter_id(self.node_id)
        self.store = MasterStore(self.paths.database, node_id=self.node_id, submitter=self.submitter)
        self.registry = PluginRegistry(self.paths.data_dir)
        self.plugin_spare = SpareWorker(lambda: bool(self.config.get("guests.warm_spare")))
        """A split's or combine's worker process, started ahead (the same owner's choice as the guests' spare)."""
        self.files = InputFiles(node_id=self.node_id, data_dir=self.paths.data_dir, address_of=self._address_of)
        self.supervisor = GuestSupervisor(
            open_input=self.files.open, input_roots=(self.files.store.root, self.files.cache.root),
            data_dir=self.paths.data_dir, settings=GuestSettings.from_config(self.config),
            on_event=self._on_guest_event, on_checkpoint=lambda task, record: self.host.on_checkpoint(task, record),
        )
        self.results_dir = self.paths.data_dir / "results"
        self.settled_views = node_views.SettledViews()
        self.membership: Membership | None = None
        self.address = ""
        self.machine = MachineWatch(config, lambda: [*self.supervisor.guest_pids(), *self.gangs.host.guest_pids()])
        self.desk = DeskWatch(config)
        self._cap_guests()
        self._machine_state: MachineState | None = None
        self._intents = dated_pause(Intents.load(self.store), time.time())
        self._intents_unsaved = False           # the disk refused to save the owner's latest wishes
        self._guests_stopped = False
        self._evicting = 0
        self._fitting_memory = False    # guests the memory pool no longer holds are being sent away
        self._pause_released: float | None = None   # the start of the pause whose guests were sent on
        self._asleep = False                    # between logind's PrepareForSleep(true) and waking
        self.sleep_watch = NOT_YET
        self._history: list[ResourceSample] = []
        self.refusals: dict[tuple[str, int], str] = {}
        """Seeds and peers that refused us (another cluster key), by address: `status` shows them."""
        self._listener: Callable[[NodeSnapshot], None] | None = None
        self._commands_in, self._commands_out = trio.open_memory_channel[Command](64)
        self._pace = SnapshotPace()
        self._hosting_due = trio.Event()
        self._published = trio.Event()
        self._stale = False      # changes since the last snapshot, which nobody was watching
        self._watchers = 0       # attached UIs waiting for the next snapshot
        self._trio_token: trio.lowlevel.TrioToken | None = None
        self._transport = None
        self._nursery: trio.Nursery | None = None
        self.links = Links(node_id=self.node_id, address_of=self._address_of, checkpoints=self.supervisor.store,
                           disk_refused=self.disk.refused)
        self.outbox = Outbox(self.paths.data_dir / "outbox.sqlite")
        self.ledger = LedgerService(
            Ledger(self.paths.data_dir / "ledger.sqlite", node_id=self.node_id), load_node_key(self.paths.data_dir),
            events=self.events, speed=self._speed, names=self._names, on_change=self.mark_changed,
            disk_refused=self.disk.refused,
        )
        self.usage = UsageBook(self.store, speed_of=self.ledger.speed_of)
        migrator = Migrator(
            node_id=self.node_id, supervisor=self.supervisor, links=self.links, events=self.events,
            destinations=self._destinations, observe_transfer=self._observe_transfer,
            move_deadline=lambda: self.supervisor.settings.checkpoint_deadline, named=self._peer_named,
        )
        self.host = HostService(
            node_id=self.node_id, supervisor=self.supervisor, links=self.links, capacity=self._capacity,
            plugin_source=self._plugin_for, has_plugin=self._has_plugin, outbox=self.outbox, events=self.events,
            settings=lambda: HostSettings.from_config(self.config), on_change=self._hosting_changed,
            alive=self._alive_nodes, own_figures=self._own_view, answer_work_request=self._answer_work_request,
            on_arrival=lambda task_id: self.balancer.note_arrival(task_id), relocator=migrator,
            paused_as=self._paused_as, pause_leaves_in=self._pause_leaves_in, usage_of=self._usage_of,
            on_spent=self._gave, disk_refused=self.disk.refused,
            named=self._peer_named,
        )
        self.bandwidths = Bandwidths(PolicySettings.from_config(self.config).default_bandwidth)
        self._balance_lock = trio.Lock()
        self.balancer = Balancer(
            read=self._balance_inputs, query=self._query_figures, move=self.move, request_work=self._request_work,
            settings=PolicySettings.from_config(self.config), interval=lambda: self.config.get("cluster.balance_interval"),
            ready=lambda: self._machine_state is not None, lock=self._balance_lock, on_round=self._balanced,
        )
        self._scheduler = MasterScheduler(
            node_id=self.node_id, store=self.store, registry=self.registry, links=self.links, events=self.events,
            results_dir=self.results_dir, replicas=CheckpointStore(self.paths.data_dir / "replicas"),
            local_checkpoints=self.supervisor.store, hosts=self._host_views,
            settings=lambda: MasterSettings.from_config(self.config, peers=self._probed_peers()), on_change=self.mark_changed,
            alive=self._alive_nodes, usage=self.usage, usage_of=self._usage_of,
            shares=lambda: ShareSettings.from_config(self.config), on_received=self._received,
            spare=self.plugin_spare, disk_refused=self.disk.refused, named=self._peer_named,
        )
        self.replicas = HeldReplicas(self.paths.data_dir / "held-replicas")
        self.links.bind(master=self._scheduler, host=self.host, keeper=self.replicas)
        self.gangs = Gangs(self.node_id, self.links.send_gang, self._open_member, self._table, time.time,
                           named=self._peer_named)
        self.gang_checkpoints = GangCheckpoints(self.paths.data_dir / "gang-checkpoints")
        self.links.bind_gangs(self.gangs)
        self._snapshot = self._build_snapshot()

    # -- the API the UI and the control socket use ---------------------------------------

    def snapshot(self) -> NodeSnapshot:
        """The latest published snapshot (at most `pace.STEADY_INTERVAL` old), or one built now if nobody watched."""
        if self._stale:
            self._snapshot, self._stale = self._build_snapshot(), False
        return self._snapshot

    def fresh_snapshot(self, *, assignments: bool = True) -> NodeSnapshot:
        """A snapshot built now, for a caller that must see the effect of a command it just ran; without
        the assignments for one that does not show them (`status`): a sweep's units are most of the cost."""
        return self._build_snapshot(assignments=assignments)

    def set_snapshot_listener(self, callback: Callable[[NodeSnapshot], None] | None) -> None:
        self._listener = callback

    async def wait_snapshot(self, seen: NodeSnapshot | None) -> NodeSnapshot:
        """The latest snapshot once it is not `seen`: what an attached UI is pushed next."""
        self._watchers += 1
        try:
            if self._stale:
                self.mark_changed()  # changes came while nobody watched: publish them now
            while self._snapshot is seen:
                await self._published.wait()
        finally:
            self._watchers -= 1
        return self._snapshot

    def refuse(self, message: str) -> None:
        """A client asked for something it may not have: the owner reads it in Events and the log."""
        log.warning("%s", message)
        self.events.add("refused", message, severity="warning", title="Refused")
        self.mark_changed()

    def link(self) -> Link:
        return EMBEDDED

    def next_target(self) -> None:
        """An embedded node is the only one this UI has: nothing to switch to."""

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
        """Carry out one command now and return its REPLY; FrostError says why it could not."""
        try:
            return await self._execute(command)
        finally:
            self.mark_changed(command=True)

    async def ask(self, query: Query) -> Any:
        """Answer one query with its REPLY; FrostError says why it could not (an unknown id, say)."""
        return await answer(self, query)

    def mark_changed(self, *, command: bool = False) -> None:
        """Something a snapshot shows changed; `command`: what a command did, shown without the steady pace's wait."""
        self._pace.mark(command=command)

    def _hosting_changed(self) -> None:
        """A guest arrived or left, or the owner's intents changed: tell the peers now, not at the
        next reading, or an eviction a moment later elsewhere still sees this node as full, paused
        or evicting and passes it by (`_publish_hosting` does, on the loop's next turn)."""
        self._hosting_due.set()
        self.mark_changed()

    async def _publish_hosting(self) -> None:
        """Publish the figures once a hosting change comes, then at most once per HOSTING_PUBLISH_GAP: a
        sweep of tiny units changes hosting several times a unit, and each publication computes the figures
        and the transfer mode from the whole table (4 % of the node's busy time at 250 units/s)."""
        while True:
            await self._hosting_due.wait()
            self._hosting_due = trio.Event()
            self._publish_figures()
            await trio.sleep(HOSTING_PUBLISH_GAP)

    def _publish_figures(self) -> ResourceFigures:
        figures = self._figures()
        if self.membership is not None:
            self.membership.set_local_figures(figures)
        return figures

    @property
    def intents(self) -> Intents:
        return self._intents

    def unit_etas(self) -> dict[str, float]:
        """Seconds each running unit of this node's assignments still needs, wherever it runs."""
        return self._scheduler.etas()

    def quarantined(self) -> dict[str, str]:
        """Hosts this node's master quarantined for a wrong result, with why."""
        return self._scheduler.quarantined()

    def unit_states(self) -> dict[str, str]:
        """Each placed unit of this node's assignments as its host reports it (paused, suspended, ...)."""
        return self._scheduler.reported_states()

    def gang_views(self) -> dict[str, GangCoordinatorView]:
        """The gangs this node is master of, by assignment id."""
        return {view.gang_id: view for view in self.gangs.runs.views()}

    def unit_leaving(self) -> dict[str, float]:
        """When each placed unit of this node's assignments that its host's owner paused leaves that host (wall time
        here), as the host last said."""
        return self._scheduler.leaving()

    def unit_waiting(self) -> dict[str, str]:
        """Why each queued unit of this node's assignments is not placed (`placement.why_not_placed`)."""
        return self._scheduler.waiting_reasons()

    def reach_status(self) -> str:
        """Whether this node, as a master, is cut off from every peer its units run on ("" if not)."""
        return self._scheduler.reach.status

    def live_progress(self) -> dict[str, float]:
        """Progress of this node's running units wherever they run, and of the guests running here."""
        return {**self._scheduler.progress(), **{g.task_id: g.progress for g in self.supervisor.figures()}}

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
                self._transport = transport
                self.links.install(transport)
                install_plugin_code(transport, self.registry)
                self.files.install(transport)
                self.ledger.install(transport)
                self.membership = Membership(
                    node_id=self.node_id, name=config.node_name, address=advertised,
                    config=MembershipConfig.from_config(config), rng=random.Random(), on_event=self._on_membership_event,
                    seeds=config.seeds, figures=self._figures(), on_refused=self._on_refused,
                )
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    await nursery.start(self.membership.serve, transport)
                    await nursery.start(partial(serve_control, watch=self._client_watch), self.paths.control_socket,
                                        self._control, self._attach)
                    listen = config.get("control.listen")
                    if listen:
                        await nursery.start(serve_remote_control, parse_address(listen, option="control.listen"),
                                            load_owner_token(self.paths.data_dir), self.node_id, self, self._control)
                    await nursery.start(self.host.serve)
                    await nursery.start(self.gangs.serve)
                    nursery.start_soon(self.supervisor.keep_warm)
                    nursery.start_soon(self.plugin_spare.keep_warm)
                    nursery.start_soon(self._run_commands)
                    nursery.start_soon(self._watch_resources)
                    nursery.start_soon(self._start_hosting, nursery)
                    nursery.start_soon(self._publish_snapshots)
                    nursery.start_soon(self._publish_hosting)
                    nursery.start_soon(self._follow_address, advertised)
                    nursery.start_soon(self.balancer.serve)
                    # Summaries change slowly: one swap per 15 gossip rounds (30 s by default).
                    await nursery.start(partial(self.ledger.serve, transport, self._peer_addresses,
                                                interval=15 * config.get("gossip.interval")))
                    nursery.start_soon(watch_sleep, self._before_sleep, self._after_wake, self._report_sleep_watch)
                    self.events.add("join", f"node {config.node_name} started at {self.address}")
                    task_status.started()
                    try:
                        await trio.sleep_forever()
                    finally:
                        with trio.CancelScope(shield=True):
                            with trio.move_on_after(SPENT_TIMEOUT):
                                await self.host.report_spent()
                            with trio.move_on_after(LEAVE_TIMEOUT):
                                await self.membership.leave()
        finally:
            self.supervisor.close()
            self.store.close()
            self.outbox.close()
            self.ledger.close()

    async def _run_commands(self) -> None:
        async for command in self._commands_out:
            try:
                await self._execute(command)
            except FrostError as error:
                self.events.error(error)
            except Exception as error:  # a bug behind one keypress must not take the node and its guests down
                log.exception("carrying out %s failed", type(command).__name__)
                self.events.add("error", f"the node could not carry out {type(command).__name__}: "
                                f"{type(error).__name__}: {error} (the node's log has the details)", severity="error")
            self.mark_changed(command=True)

    async def _execute(self, command: Command) -> Any:
        now = time.time()
        match command:
            case PauseHosting(until=until):
                began = self._intents.paused_at if self._intents.paused else now   # its guests stopped then
                self._set_intents(Intents(paused=True, paused_until=until, paused_at=began))
                self.events.add("pause", self._hosting(now).reason)
                return self._hosting(now).reason
            case ResumeHosting():
                self._set_intents(Intents())
                self.events.add("resume", "the owner resumed hosting")
                self._scheduler.wake()
                return "hosting resumed"
            case FinishThenPause():
                self._set_intents(Intents(finishing=True))
                # A gang member would not finish soon (its gang ends when all p do): its gang leaves at its
                # next barrier, from a global checkpoint taken there, as the owner's `move` does.
                members = self.gangs.host.leave("its owner is finishing, then pausing")
                leaving = f"; {counted(members, 'gang member')} leave at their gang's next barrier" if members else ""
                self.events.add("pause", f"finishing the current guests, then pausing{leaving}")
                return f"taking nothing new; pausing once the current guests finish{leaving}"
            case EvictGuests(task_id=task_id):
                return await self._evict(task_id, by_owner=True)
            case HandOffGuests():
                return await self.hand_off_guests()
            case SubmitAssignment(plugin=plugin, params=params, one_per_host=one_per_host, inputs=inputs, verify=verify,
                                  check_interval=check_interval, check_supersteps=check_supersteps,
                                  check_forced=check_forced):
                return await self._submit(plugin, params, one_per_host=one_per_host, inputs=inputs,
                                          verify=self.config.get("cluster.verify") if verify is None else verify,
                                          cadence=(check_interval, check_supersteps), forced=check_forced)
            case ClearQuarantine(node=node):
                return f"{self._scheduler.clear_quarantine(node)[:8]} gets units from this master again"
            case JoinCluster(code=code, seed=seed):
                return await self._join_cluster(ClusterKey.from_join_code(code), seed)
            case CancelAssignment(assignment_id=assignment_id):
                record = self.store.cancel_assignment(assignment_id, standing=self._scheduler.standing(assignment_id))
                await self.host.stop_assignment(assignment_id)  # guests elsewhere stop at their next report
                self.gangs.runs.cancel(assignment_id)           # a gang's members stop at once
                await self.gang_checkpoints.discard(assignment_id)
                self.events.add("assignment", f"assignment {assignment_id} cancelled")
                return record.id
            case AddPlugin(path=path):
                info = await self.registry.add_async(path)
                if info.ok:
                    self.events.add("plugin", f"plugin {info.name} {info.version} added from {path}")
                else:
                    self.events.add("plugin", f"plugin at {path} is broken: {info.error}", severity="error",
                                    title="Broken plugin")
                return node_views.plugin_view(info)
            case RemovePlugin(name=name):
                removed = await self.registry.remove_async(name)
                self.events.add("plugin", f"plugin {name} removed ({counted(len(removed), 'copy', 'copies')})")
                return f"removed {name}"
            case SaveSettings(values=values):
                edited = self.config.replace(**{k.replace(".", "__"): v for k, v in values.items()})
                save_config(edited, names=values)  # only what the owner edited; flags stay flags
                self.config = edited   # (after the save: settings the disk refused are not half in force)
                self.supervisor.update_settings(GuestSettings.from_config(self.config))
                self.machine.update_settings(self.config)
                self.desk.update_settings(self.config)
                self._cap_guests()
                self.balancer.settings = PolicySettings.from_config(self.config)
                self.bandwidths.default = self.balancer.settings.default_bandwidth
                self._scheduler.wake()
                later = waiting_for_restart(values)
                self.events.add("settings", f"saved {counted(len(values), 'setting')} to {self.paths.config_file}"
                                + (f"; {later}" if later else ""), severity="warning" if later else "info")
                return f"saved; {later}" if later else "saved"
            case MoveTask(task_id=task_id, node=node):
                return await self.move(task_id, node)
            case Remeasure():
                return Measurement(**dataclasses.asdict(await self.machine.remeasure()))
        raise FrostError(f"unknown command {command!r}")

    async def _submit(
        self, plugin_name: str, raw_params: dict[str, Any], *, one_per_host: bool = False, inputs: dict[str, str],
        verify: float = 0.0, cadence: tuple[float | None, int | None] = (None, None), forced: bool = False,
    ) -> Submitted:
        if not self.registry.plugins():
            await self.registry.scan_async()
        info = self.registry.get(plugin_name)
        params = parse_params(info, raw_params)
        if info.gang:
            return await self._submit_gang(info, params, cadence, forced)
        if cadence != (None, None) or forced:
            raise ConfigError(f"{info.name} is not a gang plugin: a check cadence is for gangs",
                              title="Bad check cadence")
        units = await split_units(info, params, spare=self.plugin_spare)
        if len(inputs) > MAX_INPUTS:
            raise ConfigError(f"{len(inputs)} input files; an assignment takes at most {MAX_INPUTS}")
        if not 0.0 <= verify <= 1.0:
            raise ConfigError(f"--verify takes a fraction from 0 to 1, not {verify:g}", title="Bad verify fraction")
        for name in inputs:  # a bad name is the owner's typo to fix first, before what is missing
            check_file_name(name, "input file")
        missing = [name for name in declared_inputs(info, params) if name not in inputs]
        if missing:
            raise ConfigError(f"{info.name} opens the input file {missing[0]!r}, but no file was given for it",
                              title="Input file missing")
        # Copied into the content-addressed store first: hosts fetch them by hash from here.
        stored = tuple([await trio.to_thread.run_sync(self.files.store.add, Path(path), name)
                        for name, path in inputs.items()])

        def store_units() -> str:   # off the event loop: its fsync, and 100,000 units made into rows (0.7 s)
            return self.store.create_assignment(
                plugin=info.name, plugin_version=info.version, plugin_hash=info.hash, params=params,
                units=[NewUnit(data=u.data, memory_bytes=u.memory_bytes, cost=u.cost) for u in units],
                one_per_host=one_per_host, inputs=stored, verify=verify,
                checked=choose_checked(len(units), verify, random.Random()))

        assignment_id = await trio.to_thread.run_sync(store_units)
        self.events.add("assignment", f"assignment {assignment_id} submitted: {counted(len(units), 'unit')} of {info.name}")
        self._scheduler.wake()
        return Submitted(id=assignment_id, units=len(units))

    def _gang_cadence(self, seconds: float | None, supersteps: int | None, forced: bool = False) -> CheckCadence:
        """When a gang's members check for better hosts: the submitter's figures, else this node's [gang] options;
        `forced` (the submitter's): every check restarts the gang on the best p."""
        seconds = self.config.get("gang.check_interval") if seconds is None else seconds
        supersteps = self.config.get("gang.check_supersteps") if supersteps is None else supersteps
        try:
            return cadence_of(seconds, supersteps, forced)
        except ValueError as error:
            raise ConfigError(str(error), title="Bad check cadence") from None

    async def _submit_gang(self, info: PluginInfo, params: dict[str, Any],
                           cadence: tuple[float | None, int | None], forced: bool = False) -> Submitted:
        """A gang plugin's assignment: one gang of p members, run by this node's gang coordinator. The submitter's
        cadence (with `forced`) is stored with it, so the gang keeps it when this node restarts."""
        checks = self._gang_cadence(*cadence, forced)
        demand = await gang_demand(info, params)
        assignment_id = self.store.create_assignment(
            plugin=info.name, plugin_version=info.version, plugin_hash=info.hash, params=params, units=[],
            cadence=cadence, forced=forced, gang_members=demand.members)
        self._run_gang(assignment_id, info, params, demand, checks)
        self.events.add("assignment", f"assignment {assignment_id} submitted: a gang of {demand.members} {info.name} "
                        f"members of {demand.memory_bytes >> 20} MiB each")
        return Submitted(id=assignment_id, units=demand.members, gang=True)

    async def _resume_gangs(self) -> None:
        """The gangs this node was master of before it stopped start again, from the last global checkpoint
        kept on disk (from their first superstep if there is none or it is unreadable): the rest of their
        coordinator's state (epochs, where each member is) lived in memory only. Without this the
        scheduler would take a gang, which has no units, for one ready to combine."""
        for assignment_id in self.store.combining_assignments():
            listed = self.store.listed(assignment_id, 0)   # (not every unit of a sweep that was combining)
            if listed.tally.count:
                continue
            record = listed.record
            try:
                info = self.registry.by_hash(record.plugin_hash)
                demand = await gang_demand(info, record.params)
                cadence = self._gang_cadence(record.check_interval, record.check_supersteps, record.check_forced)
            except FrostError as error:
                self.store.fail_assignment(assignment_id, f"its gang could not start again after a restart: {error.message}")
                await self.gang_checkpoints.discard(assignment_id)
                self.events.error(error)
                continue
            checkpoint, unreadable = await self.gang_checkpoints.load(assignment_id, info.hash, demand.members)
            for error in unreadable:
                self.events.add("assignment", error.message, severity="error", title=error.title)
            # Its earlier epochs counted up from 0 and hosts may still run members of them: a new life
            # starts above them all (wall-clock seconds, far above any count of placements).
            self._run_gang(assignment_id, info, record.params, demand, cadence,
                           epoch=int(time.time()), checkpoint=checkpoint)
            start = (f"superstep {checkpoint.superstep}, its last global checkpoint" if checkpoint
                     else "its first superstep")
            self.events.add("assignment", f"assignment {assignment_id}: its gang of {demand.members} {info.name} members starts "
                            f"again from {start}, checking {describe_cadence(cadence)} (this node, its master, "
                            f"restarted)", severity="warning")

    def _run_gang(self, assignment_id: str, info: PluginInfo, params: dict[str, Any], demand: GangDemand,
                  cadence: CheckCadence, *, epoch: int = 0, checkpoint: GlobalCheckpoint | None = None) -> None:
        self.store.index.close_assignment(assignment_id)   # it has no units: the scheduler must not combine it
        spec = GangSpec(assignment_id, self.node_id, info.name, info.version, info.hash, encode_plain(params, "parameters"),
                        demand.memory_bytes)

        def done(results: tuple) -> None:
            assert self._nursery is not None
            self._nursery.start_soon(self._finish_gang, assignment_id, info, params, results)

        def failed(reason: str) -> None:
            assert self._nursery is not None
            self._nursery.start_soon(self._until_stored, partial(self._fail_in_store, assignment_id, reason))
            self.events.add("assignment", f"assignment {assignment_id} ({info.name}) failed: {reason}", severity="error")
            self._nursery.start_soon(self.gang_checkpoints.discard, assignment_id)
            self.mark_changed()

        def keep(checkpoint: GlobalCheckpoint) -> None:
            assert self._nursery is not None
            self._nursery.start_soon(self._keep_gang_checkpoint, spec, checkpoint)

        self.gangs.runs.submit(assignment_id, demand.members, spec, on_done=done, on_failed=failed, on_checkpoint=keep,
                               cadence=cadence, epoch=epoch, checkpoint=checkpoint,
                               checkpoint_interval=self.config.get("gang.checkpoint_interval"))

    async def _keep_gang_checkpoint(self, spec: GangSpec, checkpoint: GlobalCheckpoint) -> None:
        """A gang's new global checkpoint to disk, so the gang resumes from it if this node restarts."""
        try:
            await self.gang_checkpoints.save(spec, checkpoint)
        except FrostError as error:
            self.events.add("assignment", f"assignment {spec.assignment_id}: its global checkpoint before superstep "
                            f"{checkpoint.superstep} was not kept on disk: {error.message}", severity="warning")

    async def _finish_gang(self, assignment_id: str, info: PluginInfo, params: dict[str, Any], results: tuple) -> None:
        """All members finished: combine their results in a throwaway subprocess and store the output."""
        try:
            output = await combine_output(info, params, list(results), spare=self.plugin_spare)
        except FrostError as error:
            await self._until_stored(partial(self._fail_in_store, assignment_id, f"combine failed: {error.message}"))
            self.events.error(error)
        else:
            if await self._until_stored(partial(self._scheduler.store_output, assignment_id, output)):
                self.events.add("assignment", f"assignment {assignment_id} ({info.name}) is done: {output.filename}")
        await self.gang_checkpoints.discard(assignment_id)
        self.mark_changed()

    async def _fail_in_store(self, assignment_id: str, reason: str) -> None:
        self.store.fail_assignment(assignment_id, reason)

    async def _until_stored(self, write: Callable[[], Awaitable[Any]]) -> Any:
        """`write` (to the master's store), done again every `RETRY_AFTER` seconds while the disk refuses it:
        a gang's outcome lives in memory only until it is stored."""
        while True:
            try:
                return await write()
            except StorageError as error:
                self.disk.refused(error)
                await trio.sleep(RETRY_AFTER)

    @contextlib.asynccontextmanager
    async def _open_member(self, spec: GangSpec, gang_id: str, rank: int, epoch: int, size: int,
                           checkpoint: bytes | None) -> AsyncIterator[MemberGuest]:
        """Member `rank`'s sandboxed guest in `epoch` (its plugin fetched from the gang's master if this node lacks it).

        Its task id names the epoch: the guest of an ending epoch, still emptying its scratch folder, and
        the next epoch's on the same host never share one."""
        info = await self._plugin_for(spec.plugin_hash, (spec.master,))
        params = decode_plain(spec.params, "the gang's parameters")
        member = MemberSpec(f"{gang_id}.{rank}-e{epoch}", info.path, params, rank, size, spec.memory_bytes)
        async with open_member(member, containment=self.supervisor.containment, settings=self.supervisor.settings,
                               scratch_root=self.paths.data_dir / "scratch", checkpoint=checkpoint,
                               on_event=self._on_guest_event) as guest:
            yield guest

    async def _evict(self, task_id: str | None, *, by_owner: bool) -> str:
        """Free the CPU now, then send each guest to the best peer (or back to its master's queue).

        Returns once the units are in other hands, or after EVICT_WAIT with the rest still on
        their way (they go on in the background; the CPU is free either way). Naming a guest that
        is not here is refused, so a script's typo does not pass for an eviction of nothing. The
        owner's own evict (`by_owner`) holds nothing but the evicted units, which are not taken
        straight back; the hold after an eviction by the owner policy is that policy's (`accepts_guests`).
        """
        if task_id is not None and task_id not in {h.task.task_id for h in self.host.hosted()}:
            raise FrostError(f"no guest {task_id} runs here (see `frost-tui status`)", title="No such guest")
        self._evicting += 1
        try:
            if by_owner:
                leaving = tuple(h.task.task_id for h in self.host.hosted() if task_id in (None, h.task.task_id))
                self._set_intents(send_away(self._intents, leaving, time.time() + self.config.get("owner.evict_hold")))
            else:
                self._hosting_changed()   # evicting already counted: peers see at once that nothing goes here now
            evicted = await self.host.evict(task_id)
            members = self.gangs.host.evict("evicting") if task_id is None else 0
            with trio.move_on_after(EVICT_WAIT):
                while any(h.task.task_id in evicted for h in self.host.hosted()):
                    await trio.sleep(0.05)
        finally:
            self._evicting -= 1
            self._hosting_changed()
        message = f"evicted {counted(len(evicted) + members, 'guest')}"
        if by_owner and task_id is None and evicted and not (self._intents.paused or self._intents.finishing):
            message += "; other guests may still come here (pause takes none)"   # the evict is no pause: say so
        self.events.add("evict", message)
        return message

    async def hand_off_guests(self) -> int:
        """Before a stop: checkpoint every guest and send it on, taking nothing new meanwhile.

        Unlike the owner's evict it sets no hold (a restarted node takes guests again at once);
        the caller bounds it with a deadline. A guest that no peer took and whose master is out of reach
        is not waited for: it keeps its checkpoint here, and waiting out the deadline would only delay
        the stop. Returns how many guests left.
        """
        self._evicting += 1
        self._hosting_changed()
        try:
            evicted = await self.host.evict(None)
            while still_here := [h for h in self.host.hosted() if h.task.task_id in evicted]:
                if all(h.stay is Stay.STRANDED for h in still_here):
                    return len(evicted) - len(still_here)
                await trio.sleep(0.05)
        finally:
            self._evicting -= 1
            self._hosting_changed()
        return len(evicted)

    async def _before_sleep(self, seconds: float) -> None:
        """The machine is about to sleep: hand the guests on and tell the peers we leave, within `seconds`.

        A sleeping laptop answers no probe: without this its peers would wait for the failure
        detector, then restart its guests from their last replicated checkpoint.
        """
        self._asleep = True
        self.events.add("sleep", f"the machine is going to sleep: handing {counted(self.host.running_count, 'guest')} on "
                        "and leaving the cluster")
        with trio.move_on_after(max(seconds - LEAVE_TIMEOUT, 0.0)):
            await self.hand_off_guests()
        if self.membership is not None:
            await self.membership.leave()

    async def _follow_address(self, advertised: tuple[str, int]) -> None:
        """Tell the peers when this machine's address changes (`node.addresses`): until then they call it where
        it no longer is, and in the end count it dead with its guests; one started before its network came up
        (127.0.0.1) was never found at all."""
        host, port = advertised
        while True:
            await trio.sleep(LOOK_AGAIN)
            new = moved_to(host, advertised_host(self.config))
            if new is None or self.membership is None:
                continue
            self.events.add("join", f"this machine's address changed from {host} to {new}: peers are told")
            host = new
            self.address = f"{host}:{port}"
            await self.membership.readdress((host, port))
            self.mark_changed()

    async def _after_wake(self) -> None:
        self._asleep = False
        if self.membership is not None:
            await self.membership.rejoin()
        self.events.add("wake", "the machine woke up: rejoined the cluster")
        self._hosting_changed()
        self._scheduler.wake()

    def _report_sleep_watch(self, watch: SleepWatch) -> None:
        self.sleep_watch = watch
        log.info("%s", watch.line)
        self.mark_changed()

    async def move(self, task_id: str, node: str) -> str:
        """move(task, host): the same operation for the operator and the balancer, wherever the unit runs.

        A unit running here moves directly; a unit of this node's assignments running elsewhere
        is moved by asking its current host to move it.
        """
        destination = self._resolve_node(node)
        gang_id, _, rank = task_id.rpartition(".")
        if rank.isdigit() and self.gangs.runs.move(gang_id, int(rank), f"the owner asked to move member {rank}"):
            return f"{task_id} is a gang member: the gang checkpoints at its next barrier and leaves its host"
        hosted = {h.task.task_id: h for h in self.host.hosted()}
        if task_id in hosted or self.host.forwarded_to(task_id):
            verdict = await self.host.move(task_id, destination)
        else:
            assignment_id, index = split_task_id(task_id)
            unit = self.store.unit(assignment_id, index)
            if unit.state != "running":
                raise FrostError(f"unit {task_id} is {unit.state}, not running", title="Cannot move")
            if unit.host == destination:
                raise FrostError(f"unit {task_id} already runs on {node}", title="Cannot move")
            verdict = await self.links.host(unit.host).move(task_id, destination)
        if not verdict.ok:
            raise FrostError(f"{task_id} was not moved: {verdict.reason}", title="Move failed")
        return f"{task_id} moved to {self._name_of(destination)}"

    def _resolve_node(self, node: str) -> str:
        """A node id from an id, an id prefix, a name or NAME@HOST:PORT; FrostError if none or several match."""
        members = self.membership.members() if self.membership else []
        names = node_views.display_names(members)
        exact = [r.node_id for r in members if node in (r.node_id, r.name, names[r.node_id])]
        matches = exact or [r.node_id for r in members if r.node_id.startswith(node)]
        alive = [m for m in dict.fromkeys(matches) if self._address_of(m) is not None]
        if len(alive) == 1:
            return alive[0]
        if not alive:
            raise FrostError(f"no live peer called {node!r}", title="Unknown peer")
        raise FrostError(f"{len(alive)} live peers are called {node!r}; name one of them: "
                         + ", ".join(sorted(names[m] for m in alive)), title="Ambiguous peer")

    def _peer_named(self, node_id: str) -> str:
        """A peer as events and reasons name it: one lookup by id (a placement's event must not walk the table)."""
        record = self.membership.member(node_id) if self.membership else None
        return peer_named(node_id, record.name if record else None)

    def _names(self) -> dict[str, str]:
        return node_views.display_names(self.membership.members() if self.membership else [])

    def _speed(self) -> float:
        """This machine's calibrated speed: a CPU-second here is worth this many speed units."""
        return self.machine.extremities.speed if self.machine.extremities else 1.0

    def _gave(self, hosted: Hosted, cpu_seconds: float, at: float) -> None:
        self.ledger.gave(master=hosted.master, submitter=hosted.spec.submitter or hosted.master,
                         task_id=hosted.task.task_id, epoch=hosted.task.epoch, cpu_seconds=cpu_seconds, at=at)

    def _received(self, host: str, task_id: str, epoch: int, cpu_seconds: float, ended_at: float | None) -> None:
        try:
            submitter = self.store.head(split_task_id(task_id)[0]).submitter or self.submitter  # one row, not its units
        except FrostError:
            submitter = self.submitter
        self.ledger.received(host=host, submitter=submitter, task_id=task_id, epoch=epoch, cpu_seconds=cpu_seconds,
                             ended_at=ended_at)

    def _peer_addresses(self) -> list[tuple[str, int]]:
        return [address for node_id in self._alive_nodes()
                if node_id != self.node_id and (address := self._address_of(node_id)) is not None]

    def _name_of(self, node_id: str) -> str:
        members = self.membership.members() if self.membership else []
        return node_views.display_names(members).get(node_id, node_id[:8])

    async def _join_cluster(self, key: ClusterKey, seed: str) -> str:
        """Leave this cluster for `key`'s at once: peers of this one hear a goodbye, the new key (and `seed`, a peer
        of the new cluster to ask first, as `node.seeds`) is kept for the next start, and the new cluster's peers
        appear as they answer. Refused, with nothing changed, while work of this cluster would be stranded
        (`joining.what_holds_back`). Already in `key`'s cluster, only `seed` is taken (the way in after a join
        without one)."""
        seeds = (parse_address(seed, option="seed"),) if seed else None
        if self.membership is None or self._transport is None:
            raise FrostError("the node is still starting; join once it is up", title="Not joined")
        if key == self.cluster_key:
            if seeds is None:
                return f"is already in cluster {key.fingerprint()}"
            self._keep_seed(seed, seeds)
            return f"is already in cluster {key.fingerprint()}; it asks {seed} first from now on"
        own = f"{self.node_id[:8]}-"
        guests, owed = self.host.held_for_others()
        members = sum(len(ranks) for gang_id, ranks in self.gangs.host.hosted().items() if not gang_id.startswith(own))
        held_back = what_holds_back(
            guests=guests + members, owed=owed, gangs=len(self.gangs.runs.views()),
            units_out=sum(placed.host != self.node_id for placed in self.store.index.running()))
        if held_back:
            raise FrostError(f"still in cluster {self.cluster_key.fingerprint()}: {held_back}", title="Not joined")
        try:
            await trio.to_thread.run_sync(key.save, self.config.cluster_key_file)
        except OSError as error:
            raise StorageError.writing(self.config.cluster_key_file, error) from error
        if seeds is not None:
            self._keep_seed(seed, seeds)
        left, told = self.cluster_key.fingerprint(), len(self.membership.table.active_peers())
        await self.membership.leave()
        self._transport.rekey(key)
        self.cluster_key = key
        self.refusals.clear()   # what the old key's peers said of it
        await self.membership.join_another_cluster()
        # What this machine kept for the old cluster's masters is theirs, and of no use here any more.
        await trio.to_thread.run_sync(self.host.drop_foreign_checkpoints)
        await trio.to_thread.run_sync(self.replicas.drop_all)
        said = (f"left cluster {left} ({counted(told, 'peer')} told) and joined cluster {key.fingerprint()}, whose key "
                f"{self.config.cluster_key_file} keeps; its peers appear as they answer")
        if seeds is None and self.membership.discovery.seeds:
            # Kept: where a whole office changes its key, they are the way to the new cluster too.
            kept = ", ".join(f"{host}:{port}" for host, port in self.membership.discovery.seeds)
            said += (f"; it still asks {kept} (node.seeds) first, which refuses it if it stayed in cluster {left}: "
                     "`frost-tui key set CODE --seed HOST:PORT` names a peer of this cluster instead")
        self.events.add("join", said)
        self.mark_changed()
        return said

    def _keep_seed(self, seed: str, seeds: tuple[tuple[str, int], ...]) -> None:
        """`seed` as the one peer to ask first, now and (in `node.seeds`) after a restart."""
        self.config = self.config.replace(node__seeds=[seed])
        save_config(self.config, names={"node.seeds": [seed]})
        self.membership.discovery.seeds = seeds

    def _set_intents(self, intents: Intents) -> None:
        self._intents = intents
        self._save_intents()
        self._sync_guests()
        self._hosting_changed()  # paused or not, peers learn it now

    def _save_intents(self) -> None:
        """The owner's wishes outlive a restart. They hold at once whatever the disk says: one it refused to save
        is saved again each second (`_watch_resources`) until it takes it."""
        try:
            self._intents.save(self.store)
        except StorageError as error:
            self.disk.refused(error)
            self._intents_unsaved = True
        else:
            self._intents_unsaved = False

    def _sync_guests(self) -> None:
        """Stop or continue every guest so they run exactly when the owner (intent or activity) lets them."""
        owner = self._machine_state.decision if self._machine_state else None
        should_run = not self._intents.paused and (owner is None or owner.action is GuestAction.RUN)
        if should_run and self._guests_stopped:
            self.supervisor.resume_all()
            self.gangs.host.resume_all()
            self._guests_stopped = False
        elif not should_run and not self._guests_stopped:
            self.supervisor.pause_all()
            self.gangs.host.pause_all()
            self.host.give_back_ahead(f"guests here are {self._paused_as()}")
            self._guests_stopped = True
        # A gang cannot wait for a member its owner holds: its coordinator hears so and leaves at its next check.
        held = owner is not None and owner.action is not GuestAction.RUN
        self.gangs.host.owner_holds(f"is held by its owner ({owner.reason})" if held else "")

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
            if self._intents_unsaved:
                self._save_intents()
            expired = expire_intents(self._intents, now)
            if expired != self._intents:
                if self._intents.paused and not expired.paused:
                    self.events.add("resume", "the timed pause ended")
                self._set_intents(expired)
                self._scheduler.wake()
            if self._intents.finishing and self.host.running_count == 0 and not self.gangs.host.hosted():
                self._set_intents(Intents(paused=True, paused_at=now))
                self.events.add("pause", "the last guest finished or left (gang members too); hosting is paused")
            movable = self.host.running_count > 0 and any(n != self.node_id for n in self._alive_nodes())
            presence, desk = await self.desk.read()
            self._cap_guests()
            self._fit_memory_pool()
            self._end_long_pause_hold(now)
            state = await self.machine.sample(leave_after=self._move_cost_of_guests(), movable=movable, desk=desk,
                                              input_idle=presence.idle_seconds)
            await self._follow_owner(state)
            figures = self._publish_figures()
            self.gangs.runs.table_changed(self._table())
            cores = os.cpu_count() or 1  # the reading is in percent of one core, the chart in percent of the machine
            self._history.append(ResourceSample(
                at=now, available=figures.available, owner_cpu_percent=state.reading.owner_cpu_percent / cores,
                guest_cpu_percent=state.reading.guest_cpu_percent / cores,
            ))
            del self._history[:-HISTORY_LENGTH]
            self.mark_changed()
            await sleep_to_tick(FIGURES_INTERVAL)  # on the clock watchers' grid: one wake-up for all of them

    def _cap_guests(self) -> None:
        """The guests' CPU cap the desk rules pick now (a tighter one while the owner is at the desk), in their
        cgroup at once: it is what keeps the fan quiet while the owner works, so it must not wait for a guest."""
        self.supervisor.containment.set_cpu_cap(self.desk.cpu_cap_percent)

    def _fit_memory_pool(self) -> None:
        """Send away the guests the memory pool in force no longer holds: the owner came back to a desk whose guests
        may hold less while they work (guests.memory_pool_in_use_mb), or saved a smaller pool. Their units go on
        from their checkpoints on peers, or wait in their master's queue; none comes back here while it does not
        fit (`_capacity`). BOINC suspends such tasks in place, where their memory stays taken. The evictions run
        beside the owner policy's loop, which must not wait for them."""
        if self._fitting_memory or self._evicting or self._nursery is None:
            return
        pool = self.desk.memory_pool_bytes
        held = {h.task.task_id: h.task.unit.memory_bytes for h in self.host.hosted() if h.stay is Stay.RUNNING}
        leaving = beyond_pool(tuple(held.items()), pool)
        if not leaving:
            return
        freed = sum(held[task_id] for task_id in leaving)
        self.events.add("evict", f"guests may hold {pool / 2**20:.0f} MiB together now: sending "
                        f"{counted(len(leaving), 'guest')} ({freed / 2**20:.0f} MiB) away", severity="warning")
        self._fitting_memory = True
        self._nursery.start_soon(self._send_away, leaving)

    def _paused_guests_leave_at(self) -> float | None:
        """When the owner's pause sends its stopped guests on; None while no peer is there to take them (on a
        lone node they would only wait in a queue instead of here)."""
        leave_at = paused_guests_leave_at(self._intents, self.config.get("owner.pause_evict_after"))
        if leave_at is None or not any(node != self.node_id for node in self._alive_nodes()):
            return None   # (the peers are looked at only during a pause: every offer asks for the hosting state)
        return leave_at

    def _pause_leaves_in(self) -> float:
        """Seconds until the owner's pause sends its guests on, for their masters' reports (0: not by itself)."""
        leave_at = self._paused_guests_leave_at()
        return 0.0 if leave_at is None else max(leave_at - time.time(), 0.0)

    def _end_long_pause_hold(self, now: float) -> None:
        """Send a long pause's guests on, once a pause: they leave from a checkpoint taken as they go (each is
        thawed at the lowest priority for it, as the owner policy's evictions are) and no new guest comes
        here until the resume. Beside the owner policy's loop, which must not wait for the moves."""
        leave_at = self._paused_guests_leave_at()
        if leave_at is None or now < leave_at or self._pause_released == self._intents.paused_at:
            return
        if self._evicting or self._nursery is None or not (self.host.running_count or self.gangs.host.hosted()):
            return
        self._pause_released = self._intents.paused_at
        held = format_span(now - self._intents.paused_at)
        self.events.add("pause", f"paused for {held}: the guests checkpoint and leave for other peers "
                        "(owner.pause_evict_after); hosting stays paused")
        self._nursery.start_soon(self._evict_paused)

    async def _evict_paused(self) -> None:
        async with self._balance_lock:   # not while the balancer moves a guest
            await self._evict(None, by_owner=False)

    async def _send_away(self, task_ids: tuple[str, ...]) -> None:
        try:
            async with self._balance_lock, trio.open_nursery() as nursery:  # not while the balancer moves a guest
                for task_id in task_ids:
                    nursery.start_soon(self._evict_if_here, task_id)
        finally:
            self._fitting_memory = False

    async def _evict_if_here(self, task_id: str) -> None:
        if any(h.task.task_id == task_id for h in self.host.hosted()):   # it may have finished meanwhile
            await self._evict(task_id, by_owner=False)

    async def _follow_owner(self, state: MachineState) -> None:
        """Carry out the owner policy: suspend at once, evict when it lasts, resume after quiet."""
        before = self._machine_state.decision.action if self._machine_state else GuestAction.RUN
        self._machine_state = state
        action = state.decision.action
        if action is not before:
            severity = "info" if action is GuestAction.RUN else "warning"
            shown = ", ".join(f"{name} {value:.3g}" for name, value in state.decision.figures)
            self.events.add("owner", f"{state.decision.describe(self.machine.clock())} [{shown}]", severity=severity)
        self._sync_guests()
        if action is GuestAction.EVICT and (self.host.running_count or self.gangs.host.hosted()) and not self._evicting:
            async with self._balance_lock:  # not while the balancer is moving a guest itself
                await self._evict(None, by_owner=False)
        if action is GuestAction.RUN and before is not GuestAction.RUN:
            self._scheduler.wake()

    async def _start_hosting(self, nursery: trio.Nursery) -> None:
        """Know the plugins before placing any unit: a queued unit names its plugin by hash."""
        await self.registry.scan_async()
        for info in self.registry.plugins():
            if not info.ok:
                self.events.add("plugin", f"plugin at {info.path} is broken: {info.error}", severity="warning",
                                title="Broken plugin")
        await self._resume_gangs()
        await nursery.start(self._scheduler.serve)
        self.mark_changed()

    async def _publish_snapshots(self) -> None:
        """Rebuild the snapshot after changes for whoever watches, at the pace `SnapshotPace` keeps."""
        while True:
            await self._pace.changed()
            if self._listener is None and not self._watchers:
                self._stale = True  # nobody looks (a headless node): built when somebody does
                continue
            began = time.perf_counter()
            self._snapshot, self._stale = self._build_snapshot(), False
            cost = time.perf_counter() - began
            if self._listener is not None:
                self._listener(self._snapshot)
            self._published.set()
            self._published = trio.Event()
            await self._pace.rest(cost)

    async def _attach(self, channel: Channel, request: AttachRequest, handler: Handler) -> None:
        await serve_attached(channel, request, self, handler, client="a local UI")

    async def _control(self, request: Request) -> Any:
        return await (self.ask(request) if isinstance(request, Query) else self.execute(request))

    # -- figures and views -----------------------------------------------------------------

    def _hosting(self, now: float) -> HostingState:
        owner = self._machine_state.decision if self._machine_state else None
        owner_reason = held = None
        owner_now = self.machine.clock()   # (the owner policy's times are on its clock, not `now`'s)
        if owner is None:   # (not the owner's doing: "owner active" would tell a fresh desk's owner they were busy)
            held = "measuring this machine" if not self.machine.started else None
        elif owner.action is not GuestAction.RUN:
            owner_reason = owner.describe(owner_now)
        elif not self.machine.owner.accepting(owner_now):
            held = owner.describe(owner_now)
        held = held or self.disk.reason()
        if self._asleep:
            owner_reason = "the machine is going to sleep"
        return hosting_state(
            self._intents, now=now, guests=self.host.running_count, evicting=self._evicting > 0,
            owner_active_reason=owner_reason, held_reason=held, guests_leave_at=self._paused_guests_leave_at(),
        )

    def _usage_of(self, submitter: str) -> float:
        """A submitter's decayed guest speed-unit seconds for fair share, as this node knows them
        (`fair_share.submitter_usage`): what this master accepted for its own submitters (each submitter's
        master holds all of its results), floored by the ledger's signed cluster-wide count, so a host does
        not take an offering master's word for less. With `cluster.reciprocity` on, what the submitter's node
        gave the cluster beyond what it took (its signed ledger totals) is credited."""
        now, half_life = time.time(), self.config.get("cluster.usage_half_life")
        return submitter_usage(self.usage.usage(submitter, now, half_life),
                               self.ledger.decayed_usage(submitter, now, half_life),
                               reciprocity=self.config.get("cluster.reciprocity"),
                               balance=self.ledger.balance_of(submitter_node(submitter)))

    def _paused_as(self) -> str:
        """Why guests stand still here, in the word a master shows for its units: paused by the owner's
        key, or suspended by the owner policy."""
        return "paused" if self._intents.paused else "suspended"

    def _capacity(self) -> Capacity:
        now = time.time()
        hosting = self._hosting(now)
        return Capacity(
            accepts_guests=hosting.accepts_guests, reason=hosting.reason, cpus=self.config.guest_cpus,
            memory_pool_bytes=self._unit_memory_pool(), available=self._available(hosting),
            sent_away=dict(self._intents.sent_away),
        )

    def _unit_memory_pool(self) -> int:
        """The desk's memory pool less what the gang members here declared: units and members share one pool, so
        that a host with a member of 2 GiB does not take units for the whole of it too."""
        return max(0, self.desk.memory_pool_bytes - self.gangs.host.memory_held())

    def _client_watch(self, pid: int, connected: bool) -> None:
        """A control client came or went: its CPU meanwhile is not the owner's."""
        if connected:
            self.machine.clients.connected(pid)
        else:
            self.machine.clients.disconnected(pid)

    def _available(self, hosting: HostingState) -> float:
        """What a guest gets here, as measured, and no more than the guests' CPU cap lets it have: peers place by it."""
        state = self._machine_state
        if state is None or not hosting.accepts_guests:
            return 0.0
        return round(capped_offer(state.reading.available, self.supervisor.containment.cpu_cap_percent,
                                  self._speed()), 3)

    def _guest_count(self) -> int:
        """The guests competing here for the guests' CPU, as the table counts them: units and gang members (the
        gang predicate's share on a gang host already holds its member)."""
        return self.host.running_count + len(self.gangs.host.guest_pids())

    def _figures(self) -> ResourceFigures:
        """What this node gossips: the measured availability (zero while it takes no guests)."""
        hosting = self._hosting(time.time())
        extremities = self.machine.extremities
        memory_used = sum(f.memory_bytes for f in self.supervisor.figures())
        return ResourceFigures(
            available=self._available(hosting),
            idle_extremity=extremities.idle if extremities else 0.0,
            heavy_extremity=extremities.heavy if extremities else 0.0,
            cpus=self.config.guest_cpus, free_memory=max(0, self._unit_memory_pool() - memory_used),
            guests=self._guest_count(), mode=self.transfer_view()[0],
        )

    def _table(self) -> list[NodeView]:
        """The resource table as the policies see it: every live node, this one with its own fresh figures."""
        if self.membership is None:
            return []
        table = []
        for record in self.membership.members():
            if record.state != MemberState.ALIVE:
                continue
            figures = record.figures
            view = NodeView(
                node_id=record.node_id, available=figures.available, guests=figures.guests,
                cpus=max(figures.cpus, 1), idle_extremity=figures.idle_extremity or 1.0,
                heavy_extremity=figures.heavy_extremity, free_memory=figures.free_memory,
                accepting=figures.available > 0,
            )
            if record.node_id == self.node_id:
                capacity = self._capacity()
                view = dataclasses.replace(
                    view, available=capacity.available, guests=self._guest_count(),
                    accepting=capacity.accepts_guests,
                    free_memory=max(0, capacity.memory_pool_bytes - sum(
                        h.task.unit.memory_bytes for h in self.host.hosted())),
                )
            table.append(view)
        return table

    def _host_views(self) -> list[NodeView]:
        return self._table()

    def _own_view(self) -> NodeView:
        """This node's row, fresher than its gossiped one: what it would answer a figures query with."""
        capacity = self._capacity()
        extremities = self.machine.extremities
        decision = self._machine_state.decision if self._machine_state else None
        return NodeView(
            node_id=self.node_id, available=capacity.available, guests=self._guest_count(),
            cpus=max(capacity.cpus, 1), idle_extremity=(extremities.idle if extremities else 0.0) or 1.0,
            heavy_extremity=extremities.heavy if extremities else 0.0,
            free_memory=max(0, capacity.memory_pool_bytes - sum(h.task.unit.memory_bytes for h in self.host.hosted())),
            owner_active=decision is not None and decision.action is not GuestAction.RUN,
            accepting=capacity.accepts_guests,
        )

    # -- load balancing (FROST 5.2-5.4: the balancer decides, move() carries it out) ----------------------

    def _balanced(self, decision: BalanceDecision | None) -> None:
        """A balancing round ended: a move, a request or a new refusal is news; the snapshot shows the last decision."""
        if decision is not None and decision.news:
            self.events.add("balance", decision.why, severity="info" if decision.step is not Step.NOTHING else "warning")
        self.mark_changed()

    def _balance_inputs(self) -> BalanceInputs:
        me = self._own_view()
        table = tuple(v for v in self._table() if v.node_id != self.node_id)
        extremities = self.machine.extremities
        decision = self._machine_state.decision if self._machine_state else None
        return BalanceInputs(
            me=me, table=table, guests=self.supervisor.figures(),
            bandwidths=self.bandwidths.view(v.node_id for v in table),
            speed=extremities.speed if extremities else 1.0,
            owner=decision.action if decision is not None else GuestAction.RUN,
        )

    async def _query_figures(self, node_id: str) -> NodeView | None:
        try:
            return await self.links.host(node_id).figures()
        except FrostError:
            return None

    async def _request_work(self, node_id: str) -> None:
        verdict = await self.links.host(node_id).work_request(self._own_view())
        if not verdict.ok:
            raise FrostError(verdict.reason, title="No work given")

    async def _answer_work_request(self, requester: NodeView) -> Verdict:
        decision = await self.balancer.answer_request(requester)
        return Verdict(ok=decision.step is Step.SEND, reason=decision.why)

    def _destinations(self, hosted: Hosted, state_bytes: int) -> tuple[str, ...]:
        """Where an evicted unit should go: the balancer's ranking when the owner evicts, on the same estimate."""
        table = tuple(v for v in self._table() if v.node_id != self.node_id)
        if not table:
            return ()
        speed = self.machine.extremities.speed if self.machine.extremities else 1.0
        unit = unit_estimate(
            task_id=hosted.task.task_id, assignment_id=hosted.task.assignment_id, plugin=hosted.task.plugin_name,
            memory=hosted.task.unit.memory_bytes, state_bytes=state_bytes, since_checkpoint=0.0,
            progress=hosted.progress, cpu_seconds=hosted.cpu_seconds, speed=speed, arrived_at=hosted.arrived_at,
        )
        ranked = evict_destinations(self._own_view(), table, unit, self.bandwidths.view(v.node_id for v in table),
                                    self.balancer.settings)
        return tuple(d.node_id for d in ranked)

    def _move_cost_of_guests(self) -> float | None:
        """Eq. 5.2's T_m of the costliest guest here: suspended guests wait for the owner no longer
        than moving them would cost, as the simulator's nodes do. None without guests or without
        a peer to move them to (then only `owner.evict_after` ends the wait)."""
        if not any(node != self.node_id for node in self._alive_nodes()):
            return None
        speed = self.machine.extremities.speed if self.machine.extremities else 1.0
        units = [unit_view(f, speed, 0.0) for f in self.supervisor.figures()]
        return costliest_move(units, self.bandwidths.typical())

    def _observe_transfer(self, peer: str, size: int, seconds: float) -> None:
        """Per-peer bandwidth from real transfers (the selection policy's S_c / n)."""
        if seconds > 0:
            self.bandwidths.observe(peer, size, seconds)

    def _alive_nodes(self) -> list[str]:
        members = self.membership.members() if self.membership else []
        return [r.node_id for r in members if r.state == MemberState.ALIVE]

    def _probed_peers(self) -> int:
        """Peers alive or suspect: those a probe round of this node goes through."""
        members = self.membership.members() if self.membership else []
        return sum(r.node_id != self.node_id and r.state in (MemberState.ALIVE, MemberState.SUSPECT) for r in members)

    def _address_of(self, node_id: str) -> tuple[str, int] | None:
        if self.membership is None:
            return None
        for record in self.membership.members():
            if record.node_id == node_id and record.state in (MemberState.ALIVE, MemberState.SUSPECT):
                return record.address
        return None

    def _has_plugin(self, code_hash: str) -> bool:
        """A working plugin with this hash that this node may run (cluster-shipped ones only while allowed)."""
        allowed = self.config.get("cluster.allow_cluster_plugins")
        return any(info.ok and info.hash == code_hash and (allowed or info.source != "cluster")
                   for info in self.registry.plugins())

    async def _plugin_for(self, code_hash: str, sources: tuple[str, ...]) -> PluginInfo:
        """The plugin with this hash, fetched from its master (or the unit's source) if this node lacks it."""
        if self._has_plugin(code_hash) or self._transport is None:
            return self.registry.by_hash(code_hash)
        allowed = self.config.get("cluster.allow_cluster_plugins")
        problems = []
        for source in sources:
            address = self._address_of(source)
            if address is None:
                problems.append(f"{source[:8]} is not reachable")
                continue
            try:
                info = await fetch_plugin(self._transport, address, code_hash, self.registry, allowed=allowed)
            except PluginError as error:
                if not allowed:
                    raise
                problems.append(f"{source[:8]}: {error.message}")
                continue
            self.events.add("plugin", f"plugin {info.name} {info.version} ({code_hash[:12]}) fetched from "
                            f"{source[:8]} and validated")
            return info
        raise PluginError(f"plugin {code_hash[:12]} could not be fetched: {'; '.join(problems)}")

    def transfer_view(self) -> tuple[str, float, float, float]:
        """(transfer mode, system average, lower, upper threshold) from the gossiped table (FROST 5.2)."""
        table = self._table()
        if not table:
            return "neutral", 0.0, 0.0, 0.0
        system = summarize(table)
        lower, upper = thresholds(system.average, self.balancer.settings.band)
        return transfer_mode(system).value, system.average, lower, upper

    def _on_guest_event(self, event: GuestEvent) -> None:
        severity = event.level if event.level in ("warning", "error") else "info"
        self.events.add(event.kind, f"{event.task_id}: {event.message}", severity=severity)
        self.mark_changed()

    def _on_refused(self, address: tuple[str, int], reason: str) -> None:
        """A seed or peer will not let us in: without this the owner sees only "Peers 0 alive"."""
        role = "seed" if address in self.config.seeds else "peer"
        message = f"{role} {address[0]}:{address[1]} {reason}; {JOINING}"
        self.refusals[address] = message
        log.warning("%s", message)
        self.events.add("refused", message, severity="error", title="Not let into the cluster")
        self.mark_changed()

    def _on_membership_event(self, event: MemberEvent) -> None:
        record = event.record
        where = f"{record.name} ({record.node_id[:8]}) at {record.address[0]}:{record.address[1]}"
        text = {"joined": f"{where} joined", "alive": f"{where} is alive again", "suspect": f"{where} is suspected",
                "dead": f"{where} is dead", "left": f"{where} left the cluster"}[event.kind]
        kind = {"joined": "join", "left": "leave"}.get(event.kind, event.kind)
        if event.kind in ("dead", "left"):
            self._scheduler.host_lost(record.node_id, left=event.kind == "left")
            self.gangs.runs.host_lost(record.node_id, "left the cluster" if event.kind == "left" else "is dead")
            self.links.forget(record.address)
        elif event.kind in ("joined", "alive"):
            self.gangs.runs.host_back(record.node_id)
        self.events.add(kind, text, severity="warning" if event.kind in ("suspect", "dead") else "info")
        self.mark_changed()

    def _build_snapshot(self, *, assignments: bool = True) -> NodeSnapshot:
        now = time.time()
        return node_views.build_snapshot(self, self._hosting(now), tuple(self._history), now=now,
                                         assignments=assignments)
