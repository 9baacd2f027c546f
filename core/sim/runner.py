"""One comparison: every policy on the same world (common random numbers), plus payoff replays."""

from __future__ import annotations

import random
from dataclasses import dataclass

from frost_core.api.errors import ConfigError
from frost_core.sim.engine import Outcome, Simulation
from frost_core.sim.model import Scenario
from frost_core.sim.report import Figures, summarize
from frost_core.sim.strategies import STRATEGIES

POLICIES = ("none", "random", "threshold", "ours", "ideal")


@dataclass(frozen=True)
class Comparison:
    scenario: Scenario
    seed: int
    rows: list[Figures]
    outcomes: dict[str, Outcome]


def simulate(scenario: Scenario, seed: int, policy: str, *, owners: bool = True,
             veto: tuple[int, int] | None = None) -> Outcome:
    if policy not in STRATEGIES:
        raise ConfigError(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
    return Simulation(scenario, seed, STRATEGIES[policy](), owners=owners, veto=veto).run()


def payoff_share(scenario: Scenario, seed: int, policy: str, outcome: Outcome, samples: int) -> float | None:
    """Replay the same seed without one move (the unit stays put instead); did the move help it?"""
    if samples <= 0 or not outcome.migrations:
        return None
    chosen = outcome.migrations
    if len(chosen) > samples:
        chosen = random.Random(f"{seed}:payoff").sample(chosen, samples)
    paid = 0
    for migration in chosen:
        replay = simulate(scenario, seed, policy, veto=(migration.unit, migration.ordinal))
        if outcome.finish[migration.unit] < replay.finish[migration.unit] - 1e-6:
            paid += 1
    return paid / len(chosen)


def compare(scenario: Scenario, seed: int, policies: tuple[str, ...] = POLICIES, payoff_samples: int = 20,
            payoff_for: tuple[str, ...] = ("random", "threshold", "ours")) -> Comparison:
    """Run each policy on the same world and summarize; the baseline of owner overhead is
    the same world with no owners and no policy. Replays (the costly part) only for `payoff_for`."""
    if "none" not in policies:
        policies = ("none",) + tuple(policies)
    outcomes = {name: simulate(scenario, seed, name) for name in policies}
    dedicated = simulate(scenario, seed, "none", owners=False)
    paid = {name: payoff_share(scenario, seed, name, outcomes[name], payoff_samples)
            for name in policies if name in payoff_for}
    return Comparison(scenario, seed, summarize(outcomes, dedicated, paid), outcomes)
