"""What the owner can tell a node to do: one frozen dataclass per verb, each naming its reply type.

The UI sends these one way with `Node.send_nowait` and learns the outcome from later
snapshots and events; the control socket runs them with `Node.execute` and gets the `REPLY`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from frost_core.api.snapshot import PluginView


@dataclass(frozen=True)
class PauseHosting:
    """Stop every guest at once and advertise nothing; `until` is a wall-clock time or None."""

    REPLY: ClassVar[Any] = str  # what the node does now, in words
    until: float | None = None


@dataclass(frozen=True)
class ResumeHosting:
    REPLY: ClassVar[Any] = str


@dataclass(frozen=True)
class FinishThenPause:
    """Take nothing new and pause when the current guests are done."""

    REPLY: ClassVar[Any] = str


@dataclass(frozen=True)
class EvictGuests:
    """Checkpoint and send away one guest (`task_id`) or all of them (None)."""

    REPLY: ClassVar[Any] = str
    task_id: str | None = None


@dataclass(frozen=True)
class HandOffGuests:
    """Before this node stops: checkpoint every guest and send it on to a peer. Unlike `EvictGuests` it sets no hold
    (a node started again takes guests at once); the caller bounds it with a deadline. Replies how many left."""

    REPLY: ClassVar[Any] = int


@dataclass(frozen=True)
class MoveTask:
    REPLY: ClassVar[Any] = str
    task_id: str
    node: str  # node id, node id prefix or node name


@dataclass(frozen=True)
class Submitted:
    id: str
    units: int          # its work units, or a gang's members
    gang: bool = False


@dataclass(frozen=True)
class SubmitAssignment:
    REPLY: ClassVar[Any] = Submitted
    plugin: str
    params: dict[str, Any] = field(default_factory=dict)
    one_per_host: bool = False  # FROST's rule; otherwise one unit per free core of each host
    inputs: dict[str, str] = field(default_factory=dict)  # input file name -> path on the submitting machine
    verify: float | None = None  # the fraction of units a second host re-runs to check; None: cluster.verify
    check_interval: float | None = None   # a gang's seconds between checks (0: none); None: gang.check_interval
    check_supersteps: int | None = None   # a gang's supersteps between checks (0: none); None: gang.check_supersteps
    check_forced: bool = False            # a gang: every check restarts it on the best p (BSPlib's forced checkpoint)


@dataclass(frozen=True)
class ClearQuarantine:
    """Trust a host this master quarantined for a wrong result again (a prefix of its node id is enough)."""

    REPLY: ClassVar[Any] = str
    node: str


@dataclass(frozen=True)
class CancelAssignment:
    REPLY: ClassVar[Any] = str  # the cancelled assignment's id
    assignment_id: str


@dataclass(frozen=True)
class AddPlugin:
    REPLY: ClassVar[Any] = PluginView  # `ok` is false, with the reason, for a broken plugin
    path: str


@dataclass(frozen=True)
class RemovePlugin:
    """Forget a plugin the owner added (or code a master sent): its copies go, a broken one stops warning."""

    REPLY: ClassVar[Any] = str
    name: str


@dataclass(frozen=True)
class SaveSettings:
    """Options by name ("guests.cpus": 2); validated, saved to the config file, applied live."""

    REPLY: ClassVar[Any] = str
    values: dict[str, Any]


@dataclass(frozen=True)
class Measurement:
    """What guests get here on an idle and on a busy machine, in speed units."""

    speed: float
    cpus: int
    idle: float
    heavy: float
    measured_at: float


@dataclass(frozen=True)
class Remeasure:
    """Measure the machine again and use the figures from the next reading on."""

    REPLY: ClassVar[Any] = Measurement


@dataclass(frozen=True)
class JoinCluster:
    """Leave this cluster for the one whose join code this is, now, without a restart; refused (nothing changes)
    while work of the cluster it leaves would be stranded by it."""

    REPLY: ClassVar[Any] = str
    code: str
    seed: str = ""   # HOST:PORT of a peer of that cluster, where broadcasts do not reach: kept as `node.seeds`


Command = (
    PauseHosting | ResumeHosting | FinishThenPause | EvictGuests | HandOffGuests | MoveTask | SubmitAssignment
    | CancelAssignment | AddPlugin | RemovePlugin | SaveSettings | Remeasure | ClearQuarantine | JoinCluster
)
