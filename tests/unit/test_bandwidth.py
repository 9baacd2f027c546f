"""Per-peer bandwidth: an exponential average over real transfers, and what to assume before any."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from frost_core.policies import Bandwidths, assumed_bandwidth, estimate_bandwidth


def test_estimate_follows_real_transfers():
    first = estimate_bandwidth(None, 10_000_000, 1.0)
    assert first == 10e6
    # a second 10 MB transfer at 20 MB/s moves it 30 % of the way: 10 + 0.3 × 10 = 13 MB/s
    assert estimate_bandwidth(first, 10_000_000, 0.5) == pytest.approx(13e6)
    # a tiny transfer barely moves it (latency, not bandwidth)
    assert estimate_bandwidth(first, 1_000, 1e-4) == pytest.approx(10e6, rel=1e-3)
    assert estimate_bandwidth(first, 0, 1.0) == first


def test_unknown_peers_get_the_default_then_the_median_of_measured_peers():
    assert assumed_bandwidth({}, 10e6) == 10e6
    bandwidths = Bandwidths(default=10e6)
    assert bandwidths.get("b") == 10e6
    bandwidths.observe("a", 50_000_000, 1.0)       # 50 MB/s
    bandwidths.observe("c", 100_000_000, 1.0)      # 100 MB/s
    bandwidths.observe("d", 20_000_000, 1.0)       # 20 MB/s
    # b was never measured: the median of 20, 50 and 100 MB/s
    assert bandwidths.view(["a", "b"]) == {"a": 50e6, "b": 50e6}


def test_observing_one_peer_leaves_the_others_alone():
    bandwidths = Bandwidths(default=10e6)
    bandwidths.observe("a", 8_000_000, 1.0)
    # 8 MB in 0.25 s = 32 MB/s, weighted 0.3: 8 + 0.3 × 24 = 15.2 MB/s
    assert bandwidths.observe("a", 8_000_000, 0.25) == pytest.approx(15.2e6)
    bandwidths.observe("b", 1_000_000, 0.01)
    assert bandwidths.get("a") == pytest.approx(15.2e6)


def test_an_empty_or_instant_transfer_teaches_nothing():
    bandwidths = Bandwidths(default=10e6)
    assert bandwidths.observe("a", 0, 1.0) == 10e6
    assert bandwidths.observe("a", 1000, 0.0) == 10e6
    assert bandwidths.view(["a"]) == {"a": 10e6}


def test_a_default_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        Bandwidths(default=0)


@given(st.lists(st.tuples(st.integers(1, 10**9), st.floats(1e-3, 1e3)), min_size=1, max_size=30))
def test_the_estimate_stays_within_the_observed_rates(transfers):
    bandwidths = Bandwidths(default=10e6)
    for nbytes, seconds in transfers:
        bandwidths.observe("peer", nbytes, seconds)
    rates = [n / s for n, s in transfers]
    assert min(rates) * (1 - 1e-9) <= bandwidths.get("peer") <= max(rates) * (1 + 1e-9)


def test_typical_bandwidth_is_the_median_of_measured_peers_or_the_default():
    known = Bandwidths(10e6)
    assert known.typical() == 10e6                      # nothing measured: the default
    known.observe("a", 100_000_000, 1.0)                # 100 MB/s
    known.observe("b", 100_000_000, 4.0)                # 25 MB/s
    known.observe("c", 100_000_000, 2.0)                # 50 MB/s
    assert known.typical() == known.get("a-never-seen") == known.get("c")
