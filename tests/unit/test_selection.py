"""Selection: equation 5.2's cost, 5.1's payoff, and the score that never moves a finishing unit."""

import pytest

from frost_core.policies import PolicySettings, UnitView, migration_cost, pays_off, select_guest, time_saved
from frost_core.policies.selection import costliest_move


def test_migration_cost_is_equation_5_2():
    # T_m = S_c/n + T_r + lost = 5 MB / 1 MB/s + 2 s + 10 s = 17 s
    assert migration_cost(5_000_000, 1_000_000, 2.0, 10.0) == pytest.approx(17.0)
    # at a migration point nothing is lost: 5 + 2 = 7 s
    assert migration_cost(5_000_000, 1_000_000, 2.0, 0.0) == pytest.approx(7.0)
    assert migration_cost(1, 0, 0, 0) == float("inf")


def test_the_costliest_move_is_the_owner_policys_leave_after():
    units = [UnitView("small", remaining_work=10, state_bytes=1_000_000, restore_seconds=1.0),
             UnitView("big", remaining_work=10, state_bytes=8_000_000, restore_seconds=1.0, since_checkpoint=3.0)]
    assert costliest_move(units, 1_000_000) == pytest.approx(8 + 1 + 3)  # the big one: 12 s against 2 s
    assert costliest_move([], 1_000_000) is None  # no guests: nothing to weigh against waiting


def test_time_saved_is_equation_5_1_as_a_difference():
    # stay: 100 work / 0.5 = 200 s; go: 20 s + 100 / 1.0 = 120 s -> saves 80 s
    assert time_saved(100, 0.5, 1.0, 20) == pytest.approx(80)
    assert pays_off(100, 0.5, 1.0, 20)
    # a nearly finished unit: stay 10 / 0.5 = 20 s; go 20 + 10 = 30 s -> loses 10 s
    assert time_saved(10, 0.5, 1.0, 20) == pytest.approx(-10)
    assert not pays_off(10, 0.5, 1.0, 20)
    # owner took everything here: any destination wins
    assert pays_off(10, 0.0, 0.1, 20)


def test_select_guest_prefers_the_biggest_saving_and_skips_finishing_units():
    settings = PolicySettings(min_stay=300)
    units = [
        # stay 10/0.5 = 20 s; go 15 s restore + 10 = 25 s -> loses 5 s, never chosen
        UnitView("almost-done", remaining_work=10, state_bytes=0, restore_seconds=15),
        # stay 1000/0.5 = 2000 s; go 100 MB/10 MB/s + 1 = 11 s + 1000 = 1011 s -> saves 989 s
        UnitView("big-state", remaining_work=1000, state_bytes=100_000_000, restore_seconds=1),
        # stay 2000 s; go 0.1 + 1 + 100 lost + 1000 = 1101.1 s -> saves 898.9 s
        UnitView("old-checkpoint", remaining_work=1000, state_bytes=1_000_000, since_checkpoint=100,
                 restore_seconds=1),
        UnitView("just-arrived", remaining_work=5000, arrived_at=950.0),
    ]
    chosen = select_guest(units, here=0.5, there=1.0, bandwidth=10_000_000, now=1000.0, settings=settings)
    assert chosen is not None and chosen.unit.task_id == "big-state"
    assert chosen.gain == pytest.approx(989)
    assert "saves" in chosen.explain()
    # the owner came back: the minimum stay no longer holds
    owner = select_guest(units, 0.5, 1.0, 10_000_000, 1000.0, settings, owner_returned=True)
    assert owner is not None and owner.unit.task_id == "just-arrived"


def test_nothing_selected_when_no_move_pays():
    units = [UnitView("u", remaining_work=10, restore_seconds=30)]
    assert select_guest(units, 0.9, 1.0, 1e7, 0.0) is None
