"""The symmetric transfer policy (FROST 5.2, algorithm 2): send, ask for work, or stay put."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from frost_core.policies.information import Tendency, tendency
from frost_core.policies.views import NodeView, PolicySettings


class Mode(str, Enum):
    """Which half of the symmetric policy the whole system uses now."""

    SENDER = "sender"
    RECEIVER = "receiver"
    NEUTRAL = "neutral"


class Action(str, Enum):
    SEND = "send"          # this node should push a guest away (selection, then location)
    REQUEST = "request"    # this node should ask the most loaded node for a guest
    STAY = "stay"


@dataclass(frozen=True)
class TransferDecision:
    action: Action
    mode: Mode
    average: float
    lower: float
    upper: float
    reading: float
    previous: float | None

    def explain(self) -> str:
        prev = "none" if self.previous is None else f"{self.previous:.3g}"
        return (f"{self.action.value} ({self.mode.value} mode): readings {prev} then {self.reading:.3g} "
                f"against thresholds {self.lower:.3g}..{self.upper:.3g} around average {self.average:.3g}")


@dataclass(frozen=True)
class SystemView:
    """The table boiled down once: the average offer and the average extremities."""

    average: float
    idle: float
    heavy: float
    size: int


def system_average(table: Sequence[NodeView]) -> float:
    """S_avg: the mean offer over every known node, own one included (FROST 5.1.3)."""
    if not table:
        raise ValueError("the resource table is empty")
    return sum(node.offer for node in table) / len(table)


def summarize(table: Sequence[NodeView]) -> SystemView:
    """Average offer and average extremities (per CPU, so big machines do not drag them)."""
    average = system_average(table)
    idle = sum(node.idle_extremity / max(node.cpus, 1) for node in table) / len(table)
    heavy = sum(node.heavy_extremity / max(node.cpus, 1) for node in table) / len(table)
    return SystemView(average, idle, heavy, len(table))


def thresholds(average: float, band: float) -> tuple[float, float]:
    """Lower and upper thresholds at average × (1 ∓ band) (FROST 5.2.1, relative instead of a fixed delimiter)."""
    if not 0 <= band < 1:
        raise ValueError(f"band must lie in [0, 1), not {band}")
    return average * (1 - band), average * (1 + band)


def transfer_mode(system: SystemView) -> Mode:
    """Algorithm 2, lines 5-12: sender mode when the average sits nearer the mean idle extremity.

    Few overloaded nodes (average near idle) make senders cheap to serve; few idle nodes
    (average near heavy) make it cheaper for those few to ask.
    """
    if system.size < 2:
        return Mode.NEUTRAL
    return Mode.SENDER if abs(system.average - system.idle) <= abs(system.average - system.heavy) else Mode.RECEIVER


def decide_transfer(reading: float, previous: float | None, guests: int, system: SystemView,
                    settings: PolicySettings = PolicySettings()) -> TransferDecision:
    """Algorithm 2, lines 13-31: act only when two readings in a row lie beyond the same threshold.

    `reading` and `previous` are this node's smoothed offers (`NodeView.offer`); a node without
    guests never sends, and in sender mode nobody asks for work (and vice versa).
    """
    lower, upper = thresholds(system.average, settings.band)
    mode = transfer_mode(system)
    now = tendency(reading, lower, upper)
    before = None if previous is None else tendency(previous, lower, upper)
    action = Action.STAY
    if now is before is Tendency.BELOW and mode is Mode.SENDER and guests > 0:
        action = Action.SEND
    elif now is before is Tendency.ABOVE and mode is Mode.RECEIVER:
        action = Action.REQUEST
    return TransferDecision(action, mode, system.average, lower, upper, reading, previous)
