"""Nodes that share a name (all of them called after one host) are told apart as NAME@HOST:PORT."""

import json

import jsonschema

from frost_tui.cli_docs import SCHEMA_FILE
from tests.multinode.cluster import CLUSTER_CONFIG, assignment, running_units, wait_for_members
from tests.waiting import wait_for

# Guests must run while other tests load this machine: the owner policy stands aside.
ALWAYS = CLUSTER_CONFIG + '\n[owner]\npolicy = "always"\n'


def test_clashing_names_get_an_address_suffix_and_move_accepts_it(nodes):
    master = nodes("master", name="vm", extra_config=ALWAYS)
    host = nodes("host", name="vm", seeds=(master.address,), extra_config=ALWAYS)
    wait_for_members([master, host])
    names = {peer["node_id"]: peer["name"] for peer in master.call("peers")}
    assert names == {node.node_id: f"vm@{node.address}" for node in (master, host)}
    submitted = master.call("submit", plugin="montecarlo-pi", params={"samples": 10**12, "units": 1})
    (unit,) = wait_for(lambda: running_units(master, submitted["id"]), timeout=30, what="the unit running")
    other = host if unit["host"] == master.node_id else master
    ambiguous = master.cli("move", unit["task_id"], "vm", check=False)
    assert ambiguous.returncode == 1 and "2 live peers are called 'vm'" in ambiguous.stderr
    moved = master.cli("move", unit["task_id"], f"vm@{other.address}", "--json", check=False)
    assert moved.returncode == 0, moved.stderr
    jsonschema.validate(json.loads(moved.stdout), json.loads(SCHEMA_FILE.read_text()))
    wait_for(lambda: assignment(master, submitted["id"])["units"][0]["host"] == other.node_id, timeout=30,
             what="the unit on the host named by its address")
    master.call("cancel", assignment=submitted["id"])
    wait_for(lambda: not other.call("status")["guests"], timeout=30, what="the cancelled guest to stop")
