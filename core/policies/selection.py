"""The selection policy (FROST 5.3): which guest gains most from moving, and whether any does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from frost_core.policies.views import PolicySettings, UnitView


def migration_cost(state_bytes: int, bandwidth: float, restore_seconds: float, since_checkpoint: float) -> float:
    """Equation 5.2, T_m = S_c/n + T_r + lost work, in seconds.

    FROST charged half a checkpoint period (P_c/2) on average; we know the actual work
    since the last checkpoint, and it is zero when the unit stops at a migration point.
    """
    if bandwidth <= 0:
        return float("inf")
    return state_bytes / bandwidth + restore_seconds + since_checkpoint


def costliest_move(units: Sequence[UnitView], bandwidth: float) -> float | None:
    """What moving every guest away costs the one it costs most (eq. 5.2), None without guests.

    The owner policy's `leave_after`: suspended guests wait for the owner no longer than this.
    """
    costs = [migration_cost(u.state_bytes, bandwidth, u.restore_seconds, u.since_checkpoint) for u in units]
    return max(costs, default=None)


def time_saved(remaining_work: float, here: float, there: float, cost: float) -> float:
    """Seconds gained by moving: P_rem/R_1 − (T_m + P_rem/R_2), equation 5.1 as a difference.

    FROST's form P_rem/R_1 > (P_rem + T_m)/R_2 mixes work and seconds; here P_rem is work
    (speed units × s), R are speeds, so staying takes P_rem/R_1 and moving T_m + P_rem/R_2.
    A guest that gets nothing here (owner busy) gains everything, an idle target nothing.
    """
    if there <= 0:
        return float("-inf")
    stay = remaining_work / here if here > 0 else float("inf")
    go = cost + remaining_work / there
    if stay == float("inf"):
        return float("inf")
    return stay - go


def pays_off(remaining_work: float, here: float, there: float, cost: float, min_gain: float = 0.0) -> bool:
    """Equation 5.1: move only if the unit finishes sooner elsewhere, move included."""
    return time_saved(remaining_work, here, there, cost) > min_gain


def may_leave(unit: UnitView, now: float, min_stay: float, owner_returned: bool) -> bool:
    """A moved unit stays `min_stay` seconds unless its host's owner came back (no ping-pong)."""
    return owner_returned or now - unit.arrived_at >= min_stay


@dataclass(frozen=True)
class Selection:
    unit: UnitView
    gain: float
    cost: float

    def explain(self) -> str:
        return (f"{self.unit.task_id}: saves {self.gain:.1f} s for a move costing {self.cost:.1f} s "
                f"({self.unit.state_bytes} bytes, {self.unit.since_checkpoint:.1f} s since checkpoint, "
                f"{self.unit.remaining_work:.0f} work left)")


def select_guest(units: Sequence[UnitView], here: float, there: float, bandwidth: float, now: float,
                 settings: PolicySettings = PolicySettings(), owner_returned: bool = False) -> Selection | None:
    """Algorithm 3 with a score in seconds: the guest whose move saves the most time.

    The score folds FROST's three criteria into one unit: time since the last checkpoint
    and state size over bandwidth are the cost (5.2), remaining time is what can win it
    back (5.1). A unit that would finish before its move pays off is never chosen; ties go
    to the smaller state, then the task id, so the choice is deterministic.
    """
    best: Selection | None = None
    for unit in units:
        if not may_leave(unit, now, settings.min_stay, owner_returned):
            continue
        cost = migration_cost(unit.state_bytes, bandwidth, unit.restore_seconds, unit.since_checkpoint)
        gain = time_saved(unit.remaining_work, here, there, cost)
        if gain <= settings.min_gain:
            continue
        candidate = Selection(unit, gain, cost)
        if best is None or _rank(candidate) > _rank(best):
            best = candidate
    return best


def _rank(selection: Selection) -> tuple[float, int, str]:
    return (selection.gain, -selection.unit.state_bytes, selection.unit.task_id)
