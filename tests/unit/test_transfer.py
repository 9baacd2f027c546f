"""The symmetric transfer policy (FROST algorithm 2) on small tables."""

import pytest

from frost_core.policies import Action, Mode, NodeView, PolicySettings, decide_transfer, summarize, thresholds


def table(*per_node):
    return [NodeView(str(i), available=a, guests=g, idle_extremity=1.0, heavy_extremity=0.0)
            for i, (a, g) in enumerate(per_node)]


def test_thresholds_sit_a_band_around_the_average():
    assert thresholds(0.8, 0.25) == pytest.approx((0.6, 1.0))
    with pytest.raises(ValueError, match="band"):
        thresholds(0.8, 1.5)


def test_mostly_idle_system_is_in_sender_mode():
    # offers: 1.0, 0.5, 1.0, 0.2/3 -> average 0.642; idle avg 1.0 (0.358 away), heavy 0 (0.642 away)
    system = summarize(table((1.0, 0), (1.0, 1), (1.0, 0), (0.2, 2)))
    assert system.average == pytest.approx(0.6417, abs=1e-4)
    assert summarize.__name__ and system.idle == 1.0 and system.heavy == 0.0
    from frost_core.policies import transfer_mode
    assert transfer_mode(system) is Mode.SENDER


def test_mostly_busy_system_is_in_receiver_mode():
    # offers: 0.05, 0.067, 0.05, 1.0 -> average 0.29, nearer heavy (0) than idle (1)
    from frost_core.policies import transfer_mode
    assert transfer_mode(summarize(table((0.1, 1), (0.2, 2), (0.1, 1), (1.0, 0)))) is Mode.RECEIVER


def test_sender_acts_only_after_two_readings_below_the_lower_threshold():
    system = summarize(table((1.0, 0), (1.0, 1), (1.0, 0), (0.2, 2)))   # average 0.642, lower 0.481
    settings = PolicySettings(band=0.25)
    assert decide_transfer(0.1, None, 2, system, settings).action is Action.STAY      # first reading
    assert decide_transfer(0.1, 0.7, 2, system, settings).action is Action.STAY       # tendencies differ
    decision = decide_transfer(0.1, 0.2, 2, system, settings)
    assert decision.action is Action.SEND
    assert "send" in decision.explain() and "0.642" in decision.explain()
    assert decide_transfer(0.1, 0.2, 0, system, settings).action is Action.STAY       # nothing to send


def test_receiver_asks_only_in_receiver_mode():
    busy = summarize(table((0.1, 1), (0.2, 2), (0.1, 1), (1.0, 0)))   # average 0.29, upper 0.365
    assert decide_transfer(1.0, 1.0, 0, busy).action is Action.REQUEST
    idle = summarize(table((1.0, 0), (1.0, 1), (1.0, 0), (0.2, 2)))
    assert decide_transfer(1.0, 1.0, 0, idle).action is Action.STAY


def test_single_node_is_neutral():
    system = summarize(table((0.1, 3)))
    assert decide_transfer(0.1, 0.1, 3, system).mode is Mode.NEUTRAL


def test_empty_table_is_an_error():
    with pytest.raises(ValueError, match="empty"):
        summarize([])
