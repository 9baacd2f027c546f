"""The names the owner sees and types for peers: plain where unique among the live, qualified otherwise."""

from frost_core.membership.records import MemberState, NodeRecord
from frost_core.node.views import display_names


def member(node_id: str, name: str, port: int, state: MemberState = MemberState.ALIVE) -> NodeRecord:
    return NodeRecord(node_id=node_id, name=name, address=("10.0.0.1", port), protocol_version=1, state=state)


def test_a_unique_name_is_shown_as_it_is():
    assert display_names([member("a", "desk-a", 1), member("b", "desk-b", 2)]) == {"a": "desk-a", "b": "desk-b"}


def test_two_live_nodes_sharing_a_name_are_both_qualified_by_address():
    names = display_names([member("a", "desk", 1), member("b", "desk", 2)])
    assert names == {"a": "desk@10.0.0.1:1", "b": "desk@10.0.0.1:2"}


def test_a_restarted_machine_keeps_its_plain_name_and_its_departed_ghost_is_qualified():
    for gone in (MemberState.LEFT, MemberState.DEAD):
        names = display_names([member("old", "desk-a", 1, gone), member("new", "desk-a", 2)])
        assert names == {"old": "desk-a@10.0.0.1:1", "new": "desk-a"}
