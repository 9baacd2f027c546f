"""What a script or a UI may ask a node: one frozen dataclass per question, each naming its reply type.

Queries change nothing; commands (`frost_core.api.commands`) do. Both travel over the control
socket as the same typed requests, checked against their type hints on arrival, and each
declares its `REPLY` so the client checks the answer the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from frost_core.api.ledger import LedgerView
from frost_core.api.snapshot import (
    SNAPSHOT_UNITS, AssignmentView, EventView, GuestView, HostingView, PeerView, PluginView, UnitView,
)


@dataclass(frozen=True)
class NodeStatus:
    """What `frost-tui status` shows: this node, its guests, its peers and its latest events."""

    node_id: str
    name: str
    address: str
    state: str
    hosting: HostingView
    guests: tuple[GuestView, ...]
    peers: tuple[PeerView, ...]
    assignments: int
    events: tuple[EventView, ...]
    problems: tuple[str, ...] = ()  # what keeps this node out of its cluster ("seed … refused us: …")


@dataclass(frozen=True)
class SavedResult:
    """Where FetchResult wrote an assignment's result, and which output files it saved beside it."""

    path: str
    bytes: int
    media_type: str
    files: tuple[str, ...] = ()
    files_folder: str | None = None
    named: str = ""         # the file name its plugin gave the result: its suffix says the format
    kept_files: tuple[str, ...] = ()  # not asked for `files`: the units' output files the node keeps, in kept_folder
    kept_folder: str = ""


@dataclass(frozen=True)
class ResultData:
    """An assignment's combined result itself, and the file name its plugin gave it."""

    data: bytes
    media_type: str
    filename: str


@dataclass(frozen=True)
class GetStatus:
    REPLY: ClassVar[Any] = NodeStatus


@dataclass(frozen=True)
class ListPeers:
    REPLY: ClassVar[Any] = tuple[PeerView, ...]


@dataclass(frozen=True)
class ListPlugins:
    """Every plugin this node can run, after a fresh scan of its plugin folders."""

    REPLY: ClassVar[Any] = tuple[PluginView, ...]


@dataclass(frozen=True)
class ListAssignments:
    """Every assignment as a screen lists it: up to SNAPSHOT_UNITS of its units (a longer sweep's running ones,
    then those waiting, then the last done) and the counts of all. With five finished 10,000-unit sweeps behind
    it, a node spent 1.2 s of its event loop on every unit of them, for a table of five rows."""

    REPLY: ClassVar[Any] = tuple[AssignmentView, ...]


@dataclass(frozen=True)
class GetAssignment:
    """One assignment, with every unit; `every_unit` False: as ListAssignments lists it (`submit --wait` asks so
    twice a second, and every unit of a running 10,000-unit sweep cost its node ~200 ms an ask)."""

    REPLY: ClassVar[Any] = AssignmentView
    assignment_id: str
    every_unit: bool = True


@dataclass(frozen=True)
class FoundUnits:
    """The first `limit` units that match, in index order, how many match in all, and how many the assignment has."""

    units: tuple[UnitView, ...]
    matched: int
    unit_count: int


@dataclass(frozen=True)
class FindUnits:
    """An assignment's units that match `match`, as its table would show them: a screen carries SNAPSHOT_UNITS of a
    long sweep's units, and the owner looks for the others. Every word must match: a number is a unit's, other
    words are found in its state, its host's name, its error or why it waits ("failed" finds every unit that
    failed at least once). `limit`: how many to carry (None: every one that matches)."""

    REPLY: ClassVar[Any] = FoundUnits
    assignment_id: str
    match: str
    limit: int | None = SNAPSHOT_UNITS


@dataclass(frozen=True)
class ListEvents:
    """The recent event log (what the Events tab shows), oldest first."""

    REPLY: ClassVar[Any] = tuple[EventView, ...]


@dataclass(frozen=True)
class FetchResult:
    """Save an assignment's combined result to `output` and, given `files` (a folder), its units' output files."""

    REPLY: ClassVar[Any] = SavedResult
    assignment_id: str
    output: str
    files: str | None = None


@dataclass(frozen=True)
class ReadResult:
    """An assignment's combined result, sent to the asker: a UI on another machine saves it there, where
    FetchResult would write it on the node's machine. Refused for a result too big for one reply."""

    REPLY: ClassVar[Any] = ResultData
    assignment_id: str


@dataclass(frozen=True)
class GetLedger:
    """Given vs received per peer and per day from `since` (wall time) on, and the top contributors."""

    REPLY: ClassVar[Any] = LedgerView
    since: float = 0.0


Query = (GetStatus | ListPeers | ListPlugins | ListAssignments | GetAssignment | FindUnits | ListEvents | FetchResult
         | ReadResult | GetLedger)
