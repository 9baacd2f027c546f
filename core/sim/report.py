"""Figures of merit from simulation outcomes: the table, the JSON and the optional PNG plot."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from frost_core.sim.engine import Outcome

COLUMNS = ("policy", "makespan_s", "mean_slowdown", "p95_slowdown", "owner_overhead", "owner_removed",
           "gap_closed", "migrations_per_unit", "mb_moved", "paid_off", "pingpong")


@dataclass(frozen=True)
class Figures:
    policy: str
    makespan_s: float
    mean_slowdown: float
    p95_slowdown: float
    owner_overhead: float        # mean slowdown over the dedicated run's (same world, no owners, no policy) − 1
    owner_removed: float | None  # share of "none"'s owner overhead this policy removed
    gap_closed: float | None     # share of the none→ideal gap in mean slowdown this policy closed
    gap_closed_makespan: float | None
    migrations_per_unit: float
    mb_moved: float
    paid_off: float | None       # share of sampled migrations after which the unit finished sooner
    pingpong: int

    def row(self) -> list:
        return [_show(getattr(self, c)) for c in COLUMNS]


def slowdowns(outcome: Outcome) -> list[float]:
    """Response time over the unit's size: time it would take alone on a dedicated speed-1 machine."""
    return sorted((outcome.finish[i] - outcome.arrival[i]) / outcome.size[i] for i in outcome.finish)


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(share * len(values)))]


def summarize(outcomes: dict[str, Outcome], dedicated: Outcome, paid_off: dict[str, float | None]) -> list[Figures]:
    base = _mean(slowdowns(dedicated))
    none = _mean(slowdowns(outcomes["none"])) if "none" in outcomes else None
    ideal = _mean(slowdowns(outcomes["ideal"])) if "ideal" in outcomes else None
    none_make = max(outcomes["none"].finish.values()) if "none" in outcomes else None
    ideal_make = max(outcomes["ideal"].finish.values()) if "ideal" in outcomes else None
    rows = []
    for name, outcome in outcomes.items():
        values = slowdowns(outcome)
        mean = _mean(values)
        makespan = max(outcome.finish.values())
        units = len(outcome.size)
        rows.append(Figures(
            policy=name,
            makespan_s=makespan,
            mean_slowdown=mean,
            p95_slowdown=percentile(values, 0.95),
            owner_overhead=mean / base - 1,
            owner_removed=_share(none, mean, base),
            gap_closed=_share(none, mean, ideal),
            gap_closed_makespan=_share(none_make, makespan, ideal_make),
            migrations_per_unit=len(outcome.migrations) / units,
            mb_moved=sum(m.nbytes for m in outcome.migrations) / 1e6,
            paid_off=paid_off.get(name),
            pingpong=sum(m.pingpong for m in outcome.migrations),
        ))
    return rows


def _share(worst: float | None, value: float, best: float | None) -> float | None:
    """How much of the way from `worst` to `best` `value` went (1 = all of it)."""
    if worst is None or best is None or abs(worst - best) < 1e-12:
        return None
    return (worst - value) / (worst - best)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _show(value):
    if isinstance(value, float):
        return round(value, 3)
    return "-" if value is None else value


def to_json(rows: list[Figures]) -> list[dict]:
    return [asdict(r) for r in rows]


def write_plot(rows: list[Figures], path: Path, title: str) -> Path | None:
    """Bar charts of the main figures; None when matplotlib (the `sim` extra) is missing."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("makespan_s", "makespan (s)"), ("mean_slowdown", "mean slowdown"), ("p95_slowdown", "p95 slowdown"),
              ("owner_overhead", "owner-induced slowdown"), ("migrations_per_unit", "migrations per unit"),
              ("mb_moved", "MB moved"), ("paid_off", "migrations that paid off")]
    figure, axes = plt.subplots(1, len(panels), figsize=(3 * len(panels), 3.2))
    names = [r.policy for r in rows]
    for axis, (key, label) in zip(axes, panels):
        values = [getattr(r, key) or 0.0 for r in rows]
        axis.bar(names, values, color=["#888888", "#cc7744", "#4477aa", "#228833", "#aa3377"][: len(names)])
        axis.set_title(label, fontsize=9)
        axis.tick_params(axis="x", labelrotation=45, labelsize=8)
        axis.tick_params(axis="y", labelsize=8)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
