"""FROST's equations 5.3-5.6 on hand-worked cases."""

import pytest

from frost_core.policies import NodeView, predict_destination, predict_move, predict_source, resources_per_guest


@pytest.mark.parametrize(
    ("available", "guests", "cpus", "idle", "expected"),
    [
        (1.0, 4, 1, 1.0, 0.25),     # 1.0 shared by 4 guests
        (1.0, 0, 1, 1.0, 1.0),      # no guest: what one would get (the probe), not 1/0
        (4.0, 1, 4, 4.0, 1.0),      # one guest cannot use more than one idle CPU: 4/4
        (3.0, 6, 4, 4.0, 0.5),      # 3.0 / 6 = 0.5, below the 1.0 per-CPU cap
        (-0.2, 1, 1, 1.0, 0.0),     # a negative reading counts as nothing
    ],
)
def test_resources_per_guest(available, guests, cpus, idle, expected):
    assert resources_per_guest(available, guests, cpus, idle) == pytest.approx(expected)


def test_offer_is_what_one_more_guest_would_get():
    assert NodeView("a", available=0.6, guests=3).offer == pytest.approx(0.15)   # 0.6 / 4
    assert NodeView("b", available=0.6, guests=3).per_guest == pytest.approx(0.2)
    assert NodeView("idle", available=1.0, guests=0).offer == 1.0                 # the probe's figure


def test_equations_5_3_and_5_4_on_offers():
    a = NodeView("a", available=0.6, guests=3)   # R_A = 0.6/4 = 0.15
    b = NodeView("b", available=1.0, guests=1)   # R_B = 1.0/2 = 0.5
    # 5.3: R_A* = R_A·N/(N−1) with N = 4 competitors for a newcomer: 0.15·4/3 = 0.2
    assert predict_source(a) == pytest.approx(0.2)
    # 5.4: R_B* = R_B·N/(N+1) with N = 2: 0.5·2/3 = 0.333
    assert predict_destination(b) == pytest.approx(1 / 3)


def test_move_that_brings_both_nodes_nearer_the_average_passes_5_6():
    a = NodeView("a", available=0.6, guests=3)   # R_A = 0.15 -> 0.2
    b = NodeView("b", available=1.0, guests=0)   # R_B = 1.0 -> 0.5
    p = predict_move(a, b, average=0.5)
    # before: |0.15−0.5| + |1.0−0.5| = 0.35 + 0.5 = 0.85; after: |0.2−0.5| + |0.5−0.5| = 0.3
    assert p.distance_before == pytest.approx(0.85)
    assert p.distance_after == pytest.approx(0.3)
    assert p.improves


def test_move_that_overloads_the_destination_fails_5_6():
    a = NodeView("a", available=0.9, guests=2)   # R_A = 0.3 -> 0.45
    c = NodeView("c", available=0.5, guests=1)   # R_C = 0.25 -> 0.1667
    q = predict_move(a, c, average=0.4)
    # before: |0.3−0.4| + |0.25−0.4| = 0.25; after: |0.45−0.4| + |0.1667−0.4| = 0.2833
    assert not q.improves
    assert "distance" in q.explain()
    # equal distances do not pass either (5.6 is strict): 0.2 before and after
    d = NodeView("d", available=0.5, guests=0)   # R_D = 0.5 -> 0.25
    assert not predict_move(a, d, average=0.4).improves
