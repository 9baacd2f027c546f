"""Every queued unit says why it is not placed: the first requirement no host meets."""

import pytest

from frost_core.master.placement import Need, why_not_placed
from frost_core.policies.views import NodeView

GIB = 1 << 30


def host(node_id, *, accepting=True, guests=0, cpus=2, free=4 * GIB):
    return NodeView(node_id=node_id, available=1.0, guests=guests, cpus=cpus, idle_extremity=1.0, heavy_extremity=0.0,
                    free_memory=free, accepting=accepting)


NEED = Need("a1/0", "a1", memory=2 * GIB)


@pytest.mark.parametrize("hosts, holding, refusals, reason", [
    ((), frozenset(), None, "no peer known yet"),
    ((host("me", accepting=False),), frozenset(), None, "this machine takes no guests now (paused, its owner busy, a desk rule or an eviction's hold: its Machine tab says which)"),
    ((host("a", accepting=False), host("b", accepting=False)), frozenset(), None, "no peer takes guests now (paused, their owners busy, a desk rule or an eviction's hold)"),
    # b takes guests but both its CPUs are busy; a does not take guests at all
    ((host("a", accepting=False), host("b", guests=2)), frozenset(), None, "no peer with free CPU"),
    # the largest free pool among hosts with a free CPU is 1 GiB (c's 8 GiB has no free CPU)
    ((host("a", free=GIB), host("b", free=GIB // 2), host("c", guests=2, free=8 * GIB)), frozenset(), None,
     "needs 2 GiB, largest free 1 GiB"),
    ((host("a", free=GIB + GIB // 2),), frozenset(), None, "needs 2 GiB, largest free 1.5 GiB"),
    ((host("a"),), frozenset(), {"a": "the owner evicted a1/0 from here; not taking it back before 17:40:00"},
     "refused by a: the owner evicted a1/0 from here; not taking it back before 17:40:00"),
    ((host("a"),), frozenset(), None, "waiting for the next placement round"),
])
def test_the_reason_names_what_no_host_offers(hosts, holding, refusals, reason):
    assert why_not_placed(NEED, hosts, holding, refusals) == reason


def test_a_refusal_names_the_host_as_the_master_names_it():
    refused = {"a" * 32: "paused by the owner"}
    assert why_not_placed(NEED, (host("a" * 32),), frozenset(), refused,
                          lambda node: f"fermat ({node[:8]})") == "refused by fermat (aaaaaaaa): paused by the owner"


def test_one_per_host_names_the_assignment_rule():
    need = Need("a1/1", "a1", memory=GIB, one_per_host=True)
    assert why_not_placed(need, (host("a"), host("b")), frozenset({"a", "b"})) == \
        "every free peer already runs a unit of this assignment (one per host)"
    assert why_not_placed(need, (host("a"), host("b")), frozenset({"a"})) == "waiting for the next placement round"
