"""`frost-tui status` says when this node, as a master, is cut off from every peer its units run on."""

from frost_tui.tables import status


def reply(reach: str) -> dict:
    hosting = {"state": "hosting", "reason": "idle machine", "memory_used_bytes": 0, "memory_pool_bytes": 1 << 30,
               "reach": reach}
    return {"name": "desk", "node_id": "ab" * 16, "address": "10.0.0.2:47631", "hosting": hosting, "peers": [],
            "guests": []}


def test_status_names_the_cut_off_and_the_units_left_running():
    line = "out of reach of all peers since 10:49:29; 4 unit(s) left running on them"
    assert f"Reach     {line}" in status(reply(line)).splitlines()


def test_status_says_nothing_of_reach_while_the_peers_are_heard():
    assert "Reach" not in status(reply(""))
