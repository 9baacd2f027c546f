"""Frozen views of a node's whole state: what the UI draws and what `status --json` prints.

The node builds a new NodeSnapshot whenever something changes and hands it over whole; a
reader never sees half an update and can never change the node through it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from frost_core.api.ledger import LedgerView


@dataclass(frozen=True)
class ResourceSample:
    """One point of the machine's history chart, in calibrated speed units and percent of the whole machine.

    The CPU figures count all its cores as 100 % (the unit of `owner.busy_cpu_percent`), so every
    picture of every machine has the same axis: 100 % is every core busy.
    """

    at: float
    available: float
    owner_cpu_percent: float
    guest_cpu_percent: float


@dataclass(frozen=True)
class PeerView:
    node_id: str
    name: str
    address: str
    state: str                 # alive, suspect, dead, left
    available: float
    cpus: int
    free_memory: int
    guests: int
    mode: str                  # sender, receiver, neutral
    last_seen: float           # wall-clock seconds since the epoch
    rtt_ms: float | None
    idle_extremity: float
    heavy_extremity: float
    incarnation: int
    protocol_version: int
    is_self: bool
    quarantined: str = ""      # why this node's master sends it no units (a wrong result), until the owner clears it


@dataclass(frozen=True)
class GuestView:
    task_id: str
    assignment_id: str
    plugin: str
    origin: str
    state: str                 # starting, running, paused, checkpointing, evicting, failed
    progress: float
    cpu_seconds: float
    wall_seconds: float
    since_checkpoint_seconds: float
    cpu_since_checkpoint_seconds: float
    checkpoint_bytes: int
    memory_bytes: int
    explanation: str           # which rule acted on this guest, and on which figures


@dataclass(frozen=True)
class UnitView:
    index: int
    task_id: str
    state: str                 # queued, running, done, failed
    host: str
    progress: float
    moves: int
    failures: int
    error: str | None
    host_name: str = ""        # the host's peer name as the node knows it ("" while queued)
    eta_seconds: float | None = None   # while running, at the rate it has progressed since placed
    waiting: str = ""          # why it makes no progress: while queued, why no host takes it ("no peer with free
                               # CPU", ...); while placed and `reported` standing still, who holds it there
    reported: str = ""         # while running: "paused" (by its host's owner) or "suspended" (by the owner
                               # policy there) when its host reports it standing still; "" while it runs


@dataclass(frozen=True)
class GangMemberView:
    """One member of a gang assignment: where it runs, how far it got, how long it waited for the others."""

    rank: int
    host: str                  # node id ("" while the gang waits for hosts)
    host_name: str
    superstep: int
    at_barrier: bool
    waited_seconds: float      # time spent at barriers waiting for the slowest member: the straggler waits least
    moves: int


@dataclass(frozen=True)
class GangView:
    """A gang assignment's p members at its master: phase (waiting, running, checkpointing, finished, failed)."""

    phase: str
    reason: str
    superstep: int
    epoch: int
    members: tuple[GangMemberView, ...]
    checkpoint_superstep: int | None   # the last global checkpoint: taken before this superstep
    checkpoint_at: float | None
    checkpoint_bytes: int
    moves: int
    restarts: int


SNAPSHOT_UNITS = 200
"""The units of an assignment a snapshot carries, those a screen shows (`MasterStore.listing`: the running ones, then
the others not done, then the last done). A 10,000-unit sweep's every unit in every snapshot cost its node
~90 ms a push and the attached UI ~110 ms to decode."""


@dataclass(frozen=True)
class AssignmentView:
    id: str
    plugin: str
    state: str                 # running, done, failed, cancelled
    progress: float
    created_at: float
    finished_at: float | None
    eta_seconds: float | None
    params: dict[str, Any]
    units: tuple[UnitView, ...]   # all of them, or in a snapshot SNAPSHOT_UNITS of them: those running, waiting, last done
    result_media_type: str | None
    result_filename: str | None   # the name the plugin suggests for the result
    result_path: str | None       # a readable copy of the result on this machine, once done
    error: str | None
    wasted_seconds: float = 0.0   # guest-seconds thrown away (given-up, refused or overtaken copies)
    verify: float = 0.0           # the fraction of units asked to be checked by a second host
    verified: int = 0             # units whose result two hosts agreed on
    verification: str = ""        # the same in words: "3 of 100 units verified by a second host", "not verified"
    waste: dict[str, float] = dataclasses.field(default_factory=dict)  # the same, by reason (master.waste)
    gang: GangView | None = None  # a gang plugin's assignment: its members instead of units
    unit_count: int = -1          # how many units the assignment has (-1: count `units`, below)
    units_done: int = -1
    moves: int = -1               # its units' moves, all of them
    files_folder: str | None = None   # once done, where the node's machine keeps its units' output files, if any
    gang_members: int = 0         # a gang's p, also once it ended and `gang` is gone (0: units)

    def __post_init__(self) -> None:
        """A view made by hand, or an older node's (a query's reply from before 2026-11-27), has every unit and none
        of the counts: they are counted here."""
        if self.unit_count < 0:
            object.__setattr__(self, "unit_count", len(self.units))
            object.__setattr__(self, "units_done", sum(1 for u in self.units if u.state == "done"))
            object.__setattr__(self, "moves", sum(u.moves for u in self.units))


@dataclass(frozen=True)
class ParamView:
    name: str
    kind: str                  # int, float, str, bool
    default: Any
    help: str
    minimum: float | None
    maximum: float | None
    choices: tuple[Any, ...]


@dataclass(frozen=True)
class PluginView:
    name: str
    version: str
    hash: str
    source: str                # bundled, entry-point, added, cluster
    path: str
    ok: bool
    error: str | None
    description: str
    params: tuple[ParamView, ...]
    gang: bool = False         # a gang plugin: an assignment is p members stepping together
    superseded_by: str = ""    # a working copy `submit NAME` passes over: the hash of the one it runs


@dataclass(frozen=True)
class EventView:
    at: float
    kind: str                  # join, leave, suspect, dead, alive, move-in, move-out, checkpoint, evict, pause, resume, assignment, guest-log, refused, error
    message: str
    severity: str = "info"     # info, warning, error
    title: str = ""


@dataclass(frozen=True)
class HostingView:
    """What this machine does for guests right now, and why."""

    state: str                 # hosting, idle, paused, owner-active, held, evicting, finishing
    reason: str
    paused_until: float | None
    finishing: bool
    transfer_mode: str         # sender, receiver, neutral
    system_average: float
    lower_threshold: float
    upper_threshold: float
    memory_pool_bytes: int
    memory_used_bytes: int
    guest_cpus: int
    balance: str = ""          # the load balancer's last decision and why ("" before its first round)
    owner: tuple[str, ...] = ()   # the owner policy's decision (rule, reason, figures), then one line per desk rule
    not_owner: str = ""        # the CPU the last reading did not count as the owner's, and what this OS hides
    reach: str = ""            # "out of reach of all peers since ...; N units left running on them", or ""
    presence: str = ""         # where the owner's input idle time comes from, or "no presence source"
    presence_brief: str = ""   # the same in one line, for the screen
    sleep: str = ""            # whether logind lets the node hand its guests on before the machine sleeps
    sleep_brief: str = ""      # the same in one line, for the screen
    isolation: tuple[str, ...] = ()  # "layer: state" per guest isolation layer, then a "warning: ..." if any is missing


@dataclass(frozen=True)
class NodeSnapshot:
    node_id: str
    name: str
    address: str
    cluster_join_code: str
    taken_at: float
    hosting: HostingView
    history: tuple[ResourceSample, ...]
    peers: tuple[PeerView, ...]
    guests: tuple[GuestView, ...]
    assignments: tuple[AssignmentView, ...]
    plugins: tuple[PluginView, ...]
    events: tuple[EventView, ...]
    settings: dict[str, Any]
    ledger: LedgerView = LedgerView()

    def to_json(self) -> dict[str, Any]:
        """Plain data for `status --json`; the join code is a secret and stays out."""
        data = dataclasses.asdict(self)
        data.pop("cluster_join_code")
        data["state"] = self.hosting.state
        return data
