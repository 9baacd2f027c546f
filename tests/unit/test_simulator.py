"""The simulator on small worlds: same world for every policy, sane orderings, the command line."""

import dataclasses
import itertools
import json
import random

import pytest

from frost_core.api.errors import ConfigError
from frost_core.sim import SCENARIOS, compare, main, simulate
from frost_core.sim.model import frost_owner, on_off_owner

SMALL_FROST = dataclasses.replace(SCENARIOS["frost"], nodes=9)
SMALL_MIXED = dataclasses.replace(SCENARIOS["mixed"], nodes=12, units_per_node=1.5)


def busy_share(changes, horizon):
    points = list(itertools.takewhile(lambda p: p[0] < horizon, changes)) + [(horizon, 0.0)]
    return sum(level * (b[0] - a[0]) for a, b in zip(points, points[1:]) for level in [a[1]]) / horizon


def test_owner_models_have_the_documented_duty_cycles():
    # FROST: a third of the time heavy, a third with 5 s of every 60 s busy: 1/3 + 1/36 ≈ 0.36
    assert busy_share(frost_owner(random.Random(1)), 200 * 1800) == pytest.approx(1 / 3 + 1 / 36, abs=0.02)
    # on/off with mean on 100 s and off 300 s: busy a quarter of the time
    assert busy_share(on_off_owner(random.Random(2), 100, 300), 10**6) == pytest.approx(0.25, abs=0.02)


def test_same_seed_same_world_for_every_policy():
    a = simulate(SMALL_MIXED, 7, "ours")
    b = simulate(SMALL_MIXED, 7, "ours")
    assert a.finish == b.finish and len(a.migrations) == len(b.migrations)
    none = simulate(SMALL_MIXED, 7, "none")
    assert none.size == a.size and none.arrival == a.arrival      # common random numbers
    assert simulate(SMALL_MIXED, 8, "none").size != none.size


def test_policies_order_as_expected_on_a_small_frost_world():
    result = compare(SMALL_FROST, 3, payoff_samples=3)
    rows = {r.policy: r for r in result.rows}
    assert rows["ideal"].mean_slowdown <= rows["none"].mean_slowdown
    assert rows["ours"].mean_slowdown < rows["none"].mean_slowdown
    assert rows["ours"].owner_removed > 0.5           # migration takes most of the owners' toll away
    assert rows["ours"].pingpong == 0
    assert rows["none"].migrations_per_unit == 0
    assert rows["ours"].paid_off is not None and rows["ours"].paid_off >= 0.5


def test_equally_loaded_identical_nodes_never_move_anything():
    calm = dataclasses.replace(SCENARIOS["frost"], nodes=6, units_per_node=1.0, owner="none")
    outcome = simulate(calm, 1, "ours")
    assert outcome.migrations == []
    assert len(outcome.finish) == 6


def test_replay_without_a_move_keeps_that_unit_where_it_was():
    outcome = simulate(SMALL_FROST, 3, "ours")
    first = outcome.migrations[0]
    replay = simulate(SMALL_FROST, 3, "ours", veto=(first.unit, first.ordinal))
    moved = [m for m in replay.migrations if m.unit == first.unit and m.ordinal >= first.ordinal]
    assert moved == []
    # everything before the vetoed move happened the same way
    assert [(m.at, m.unit) for m in replay.migrations if m.at < first.at] == \
           [(m.at, m.unit) for m in outcome.migrations if m.at < first.at]


def test_command_line_prints_the_table_and_writes_json_and_plot(tmp_path, capsys):
    out = tmp_path / "sim.json"
    plot = tmp_path / "sim.png"
    code = main(["--scenario", "frost", "--nodes", "6", "--payoff-samples", "0", "--json", str(out),
                 "--plot", str(plot)])
    assert code == 0
    printed = capsys.readouterr().out
    for policy in ("none", "random", "threshold", "ours", "ideal"):
        assert policy in printed
    data = json.loads(out.read_text())
    assert {row["policy"] for row in data["rows"]} == {"none", "random", "threshold", "ours", "ideal"}
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "plot skipped" in printed
    else:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("argv", "message"), [
    (["--nodes", "1"], "at least 2 nodes"),
    (["--policies", "none,clever"], "unknown policy 'clever'"),
    (["--units-per-node", "0"], "units per node"),
])
def test_bad_input_gets_a_clear_error(argv, message, capsys):
    assert main(argv + ["--payoff-samples", "0"]) == 2
    assert message in capsys.readouterr().err


def test_the_simulators_options_reach_it_after_this_programs_own(tmp_path, capsys):
    # `frost-tui --data-dir d simulate --nodes 1` refused "--nodes" as unknown: only a command line that began
    # with `simulate` reached the simulator.
    from frost_tui.cli import main as frost_tui

    assert frost_tui(["--data-dir", str(tmp_path), "simulate", "--nodes", "1", "--payoff-samples", "0"]) == 2
    assert "at least 2 nodes" in capsys.readouterr().err


def test_scenario_validation_names_the_field():
    with pytest.raises(ConfigError, match="owner model"):
        dataclasses.replace(SCENARIOS["mixed"], owner="martian")


def test_ours_gossips_zero_while_a_node_takes_no_guests():
    # Like the live node: a node whose owner policy holds new guests after evicting its own
    # publishes 0, so peers do not rank it above a node that would take the guest.
    from frost_core.sim.engine import Simulation
    from frost_core.sim.strategies import OursStrategy

    quiet = dataclasses.replace(SMALL_FROST, owner="none")
    strategy = OursStrategy()
    sim = Simulation(quiet, 1, strategy)
    strategy.start(sim)
    busy = sim.nodes[0]
    for at, load, tag in ((1.0, 1.0, "owner"), (16.0, 1.0, "timer"), (17.0, 0.0, "owner"), (20.0, 0.0, "timer")):
        sim.now = at
        sim.settle(busy)
        busy.load = load
        strategy.on_check(sim, busy, tag)   # suspended at 1, evicted at 16 (evict_after 15); quiet from 16; runs at 20
    assert not busy.suspended and not busy.policy.owner.accepting(25.0)   # within the 60 s hold after the eviction
    sim.now = 25.0
    strategy.on_tick(sim)
    published = {index: available for _, index, available, _ in strategy.news}
    assert busy.policy.window[-1] > 0          # its guests could run again: the reading is not zero ...
    assert published[0] == 0.0                 # ... but it takes no new ones, so it shows 0
    assert published[1] > 0                    # a quiet peer publishes what its guests would get


def test_ours_evicts_once_waiting_cost_what_the_move_would():
    # The simulator hands the owner policy its guests' move cost (state / 10 MB/s + restore,
    # about 0.6 s), so guests placed on a busy machine leave 1.5 s (detection) + 0.6 s after the
    # start, not after evict_after = 15 s.
    outcome = simulate(SMALL_FROST, 3, "ours")
    first_owner_moves = [m for m in outcome.migrations if m.reason == "owner" and m.at < 20]
    assert first_owner_moves and all(m.at < 5 for m in first_owner_moves)
