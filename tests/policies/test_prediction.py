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


def test_equations_5_3_and_5_4_on_frost_figures():
    a = NodeView("a", available=0.6, guests=3)   # R_A = 0.2
    b = NodeView("b", available=1.0, guests=1)   # R_B = 1.0
    # 5.3: R_A* = R_A·N_A/(N_A−1) = 0.2·3/2 = 0.3
    assert predict_source(a) == pytest.approx(0.3)
    # 5.4: R_B* = R_B·N_B/(N_B+1) = 1.0·1/2 = 0.5
    assert predict_destination(b) == pytest.approx(0.5)


def test_move_that_brings_both_nodes_nearer_the_average_passes_5_6():
    a = NodeView("a", available=0.6, guests=3)   # R_A = 0.2
    b = NodeView("b", available=1.0, guests=1)   # R_B = 1.0
    p = predict_move(a, b, average=0.5)
    # before: |0.2−0.5| + |1.0−0.5| = 0.3 + 0.5 = 0.8; after: |0.3−0.5| + |0.5−0.5| = 0.2
    assert p.distance_before == pytest.approx(0.8)
    assert p.distance_after == pytest.approx(0.2)
    assert p.improves


def test_move_that_overloads_the_destination_fails_5_6():
    a = NodeView("a", available=0.9, guests=2)   # R_A = 0.45
    b = NodeView("b", available=1.0, guests=1)   # R_B = 1.0
    p = predict_move(a, b, average=0.5)
    # before: 0.05 + 0.5 = 0.55; after: |0.9−0.5| + |0.5−0.5| = 0.4 ... improves
    assert p.improves
    c = NodeView("c", available=0.5, guests=1)   # R_C = 0.5, at the average
    q = predict_move(a, c, average=0.5)
    # before: 0.05 + 0 = 0.05; after: |0.9−0.5| + |0.25−0.5| = 0.65
    assert not q.improves
    assert "distance" in q.explain()
