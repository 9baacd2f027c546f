"""`frost-tui key set CODE` on a running node: it leaves its cluster for the other one at once, and not while work of
its cluster would be stranded."""

from __future__ import annotations

from frost_core.wire.security import ClusterKey
from tests.multinode.cluster import CLUSTER_CONFIG, assignment, running_units, wait_for_members
from tests.waiting import wait_for

ENDLESS = {"samples": 10**12, "units": 1}
ENDLESS_GANG = {"height": "256", "width": "256", "members": "2", "iterations": "10000000"}   # far from settled
# Not about the owner: the units must run on the peer while this machine does other work (CI).
OWNER_AWAY = '\n[owner]\npolicy = "always"\nmemory_pressure = 100\n'


def alive_peers(node) -> set[str]:
    return {p["name"] for p in node.call("peers") if p["state"] == "alive" and not p["is_self"]}


def wait_until_they_meet(mover, other) -> None:
    wait_for(lambda: alive_peers(mover) == {"other"} and alive_peers(other) == {"mover"}, timeout=30,
             what="the mover and the other cluster to see each other",
             show=lambda: (alive_peers(mover), alive_peers(other)))


def desks_on_the_defaults(nodes, tmp_path):
    """The mover in the first node's cluster, and a node of another cluster (its key file returned too), all on the
    defaults (gossip timers included); broadcasts off only so that the test stays on loopback."""
    other_key = tmp_path / "other-cluster.key"
    ClusterKey.generate().save(other_key)
    mover_key = tmp_path / "mover.key"   # the mover's own file: `key set` writes the node's key file
    ClusterKey.load(tmp_path / "cluster.key").save(mover_key)
    first = nodes("first", base_config="")
    mover = nodes("mover", seeds=(first.address,), key_file=mover_key, base_config="")
    other = nodes("other", key_file=other_key, base_config="")
    wait_for(lambda: alive_peers(mover) == {"first"}, timeout=30, what="the mover in the first cluster")
    return first, mover, other, other_key


def test_key_set_moves_a_running_node_to_another_cluster_at_once_but_not_while_its_units_run_on_a_peer(
        nodes, tmp_path):
    other_key = tmp_path / "other-cluster.key"
    ClusterKey.generate().save(other_key)
    mover_key = tmp_path / "mover.key"   # the mover's own file: `key set` writes the node's key file
    ClusterKey.load(tmp_path / "cluster.key").save(mover_key)
    first = nodes("first", extra_config=CLUSTER_CONFIG + OWNER_AWAY)
    mover = nodes("mover", seeds=(first.address,), key_file=mover_key, extra_config=CLUSTER_CONFIG + OWNER_AWAY)
    other = nodes("other", key_file=other_key, extra_config=CLUSTER_CONFIG + OWNER_AWAY)
    wait_for_members([first, mover])
    assert not alive_peers(other)
    other_code = ClusterKey.load(other_key).to_join_code()

    # The mover's unit runs on its peer: leaving now would strand them, so nothing changes.
    mover.call("pause")
    assignment_id = mover.call("submit", plugin="montecarlo-pi", params=ENDLESS, verify=0.0)["id"]
    wait_for(lambda: len(running_units(mover, assignment_id)) == 1, timeout=60, what="the unit on the first node")
    refused = mover.cli("key", "set", other_code, "--seed", other.address, check=False)
    assert refused.returncode == 1
    assert "Not joined" in refused.stderr and "1 unit of your assignments runs on peers" in refused.stderr, refused.stderr
    assert ClusterKey.load(mover_key) != ClusterKey.load(other_key)
    assert alive_peers(mover) == {"first"}
    # and the first node, which hosts it, may not leave either
    refused = first.cli("key", "set", other_code, check=False)
    assert "1 guest of other peers' assignments runs here" in refused.stderr, refused.stderr

    mover.call("cancel", assignment=assignment_id)
    # Its guest on the first node stops at its next report, after the master's view: until then it holds that
    # node too (and was counted beside the gang member below: "2 guests ... run here", once in CI).
    wait_for(lambda: not running_units(mover, assignment_id) and not first.call("status")["guests"], timeout=30,
             what="the unit stopped, its guest on the first node too",
             show=lambda: [g["task_id"] for g in first.call("status")["guests"]])

    # A gang of the mover's with a member on each node: neither may leave while it runs.
    mover.call("resume")
    gang_id = mover.call("submit", plugin="heat-diffusion", params=ENDLESS_GANG)["id"]
    wait_for(lambda: (g := assignment(mover, gang_id)["gang"])["phase"] == "running"
             and len({m["host"] for m in g["members"] if m["host"]}) == 2, timeout=60, what="the gang on both nodes")
    refused = first.cli("key", "set", other_code, check=False)
    assert "1 guest of other peers' assignments runs here" in refused.stderr, refused.stderr
    refused = mover.cli("key", "set", other_code, "--seed", other.address, check=False)
    assert "1 gang of yours runs" in refused.stderr, refused.stderr
    mover.call("cancel", assignment=gang_id)
    said = mover.cli("key", "set", other_code, "--seed", other.address).stdout
    assert said.startswith(f"The node left cluster {ClusterKey.load(tmp_path / 'cluster.key').fingerprint()} "
                           f"(1 peer told) and joined cluster {ClusterKey.load(other_key).fingerprint()}"), said
    wait_until_they_meet(mover, other)
    wait_for(lambda: {p["name"]: p["state"] for p in first.call("peers")}.get("mover") == "left", timeout=10,
             what="the first node to hear the mover leave")
    # The new cluster is kept for the next start: its key in the node's key file, the seed in its config.
    assert ClusterKey.load(mover_key) == ClusterKey.load(other_key)
    assert other.address in (mover.data_dir / "config.toml").read_text()
    # Work flows in the new cluster.
    other.call("pause")
    assignment_id = other.call("submit", plugin="montecarlo-pi", params={"samples": 40000, "units": 2}, verify=0.0)["id"]
    # (guests start at the lowest CPU weight: on a machine full of other work that takes a minute or more)
    wait_for(lambda: other.call("assignment", assignment=assignment_id)["state"] == "done", timeout=180,
             what="the other cluster's assignment, run on the mover")
    assert {u["host"] for u in other.call("assignment", assignment=assignment_id)["units"]} == {mover.node_id}


def test_on_the_defaults_a_running_node_joins_another_cluster_and_the_old_one_hears_it_leave(nodes, tmp_path):
    first, mover, other, other_key = desks_on_the_defaults(nodes, tmp_path)   # nothing switched out of the way

    mover.cli("key", "set", ClusterKey.load(other_key).to_join_code(), "--seed", other.address)
    wait_until_they_meet(mover, other)
    wait_for(lambda: {p["name"]: p["state"] for p in first.call("peers")}.get("mover") == "left", timeout=10,
             what="the first node to hear the mover leave")
    assert first.call("status")["problems"] == [] and mover.call("status")["problems"] == []


def test_a_join_without_a_seed_says_which_old_seeds_it_still_asks_and_a_seed_given_after_it_leads_in(nodes, tmp_path):
    """The seeds a node was started with are of the cluster it leaves, unless the whole office changes its key: kept,
    and said, with the way to name a peer of the new cluster, which works on a node that is in it already."""
    first, mover, other, other_key = desks_on_the_defaults(nodes, tmp_path)   # nothing switched out of the way
    other_code = ClusterKey.load(other_key).to_join_code()
    fingerprint = ClusterKey.load(other_key).fingerprint()

    said = mover.cli("key", "set", other_code).stdout
    assert f"joined cluster {fingerprint}" in said and f"it still asks {first.address} (node.seeds) first" in said, said
    assert "--seed HOST:PORT" in said
    said = mover.cli("key", "set", other_code, "--seed", other.address).stdout
    assert said.strip() == f"The node is already in cluster {fingerprint}; it asks {other.address} first from now on."
    wait_until_they_meet(mover, other)
    assert other.address in (mover.data_dir / "config.toml").read_text()
