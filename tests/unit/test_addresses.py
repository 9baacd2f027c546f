"""Which address a node tells its peers when the machine's own changes (tests/multinode/test_address_change.py
runs it in network namespaces)."""

from frost_core.node.addresses import moved_to


def test_a_new_network_address_is_told_and_the_same_one_is_not():
    assert moved_to("192.168.1.20", "10.0.0.7") == "10.0.0.7"
    assert moved_to("192.168.1.20", "192.168.1.20") is None


def test_a_node_started_without_a_network_takes_its_first_real_address():
    assert moved_to("127.0.0.1", "192.168.1.20") == "192.168.1.20"


def test_a_network_that_went_away_keeps_the_last_real_address_rather_than_send_peers_to_themselves():
    assert moved_to("192.168.1.20", "127.0.0.1") is None
    assert moved_to("fd00::20", "::1") is None
