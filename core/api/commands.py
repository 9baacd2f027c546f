"""What the owner can tell a node to do: one frozen dataclass per verb.

The UI sends these one way with `Node.send_nowait` and learns the outcome from later
snapshots and events; the control socket runs them with `Node.execute` and gets a reply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PauseHosting:
    """Stop every guest at once and advertise nothing; `until` is a wall-clock time or None."""

    until: float | None = None


@dataclass(frozen=True)
class ResumeHosting:
    pass


@dataclass(frozen=True)
class FinishThenPause:
    """Take nothing new and pause when the current guests are done."""


@dataclass(frozen=True)
class EvictGuests:
    """Checkpoint and send away one guest (`task_id`) or all of them (None)."""

    task_id: str | None = None


@dataclass(frozen=True)
class MoveTask:
    task_id: str
    node: str  # node id, node id prefix or node name


@dataclass(frozen=True)
class SubmitAssignment:
    plugin: str
    params: dict[str, Any] = field(default_factory=dict)
    one_per_host: bool = False  # FROST's rule; otherwise one unit per free core of each host
    inputs: dict[str, str] = field(default_factory=dict)  # input file name -> path on the submitting machine


@dataclass(frozen=True)
class CancelAssignment:
    assignment_id: str


@dataclass(frozen=True)
class AddPlugin:
    path: str


@dataclass(frozen=True)
class SaveSettings:
    """Options by name ("guests.cpus": 2); validated, saved to the config file, applied live."""

    values: dict[str, Any]


Command = (
    PauseHosting | ResumeHosting | FinishThenPause | EvictGuests | MoveTask | SubmitAssignment
    | CancelAssignment | AddPlugin | SaveSettings
)
