"""Real headless nodes in separate processes on loopback: joining, converging, dying, refusing."""

import pytest

from frost_core.wire.security import ClusterKey
from tests.waiting import wait_for

pytestmark = pytest.mark.slow


def alive_ids(node):
    return {pid for pid, p in node.peers().items() if p["state"] == "alive"}


def test_two_nodes_joined_by_a_seed_see_each_other(nodes):
    first = nodes("first")
    second = nodes("second", seeds=(first.address,))
    ids = {first.node_id, second.node_id}
    wait_for(lambda: alive_ids(first) == ids and alive_ids(second) == ids, timeout=20, what="mutual membership")
    peer = first.peers()[second.node_id]
    assert peer["name"] == "second" and peer["address"] == second.address
    assert peer["cpus"] >= 1 and peer["free_memory"] > 0


def test_five_nodes_converge_through_one_seed_each(nodes):
    """Each newcomer knows only the previous node; gossip must spread the whole table."""
    started = [nodes("n0")]
    for i in range(1, 5):
        started.append(nodes(f"n{i}", seeds=(started[-1].address,)))
    ids = {n.node_id for n in started}
    wait_for(lambda: all(alive_ids(n) == ids for n in started), timeout=30, what="five-node convergence")
    names = {p["name"] for p in started[0].call("peers")}
    assert names == {f"n{i}" for i in range(5)}


def test_a_killed_node_is_marked_dead_on_every_peer(nodes):
    started = [nodes("a")]
    started += [nodes(name, seeds=(started[0].address,)) for name in ("b", "c")]
    ids = {n.node_id for n in started}
    wait_for(lambda: all(alive_ids(n) == ids for n in started), timeout=20, what="convergence")
    victim = started.pop()
    victim_id = victim.node_id
    victim.kill()
    wait_for(lambda: all(n.peers()[victim_id]["state"] == "dead" for n in started), timeout=20,
             what="the killed node marked dead everywhere")
    assert all(alive_ids(n) == ids - {victim_id} for n in started)


def test_a_node_that_quits_is_seen_leaving(nodes):
    first = nodes("first")
    second = nodes("second", seeds=(first.address,))
    second_id = second.node_id
    wait_for(lambda: second_id in alive_ids(first), timeout=20, what="join")
    second.stop()
    wait_for(lambda: first.peers()[second_id]["state"] == "left", timeout=5, what="departure seen as 'left'")


def test_a_node_with_the_wrong_key_is_refused_and_disturbs_nothing(nodes, tmp_path):
    first = nodes("first")
    second = nodes("second", seeds=(first.address,))
    ids = {first.node_id, second.node_id}
    wait_for(lambda: alive_ids(first) == ids, timeout=20, what="join")
    other_key = tmp_path / "other.key"
    ClusterKey.generate().save(other_key)
    intruder = nodes("intruder", key_file=other_key, seeds=(first.address, second.address))
    # Give the intruder several gossip rounds to try; it must never appear, and never learn us.
    wait_for(lambda: (first.data_dir / "logs" / "frost-tui.log").read_text().count("refused") >= 1,
             timeout=15, what="the refusal in the log")
    assert alive_ids(first) == ids and alive_ids(second) == ids
    assert set(intruder.peers()) == {intruder.node_id}
    log = (first.data_dir / "logs" / "frost-tui.log").read_text()
    assert log.count("refused") <= 3, "refusals are logged once per source, not per packet"


def test_cli_verbs_fail_clearly_when_no_node_runs(tmp_path):
    import subprocess

    from tests.nodes import FROST_TUI

    result = subprocess.run([FROST_TUI, "status", "--data-dir", str(tmp_path / "nobody")], capture_output=True,
                            text=True)
    assert result.returncode != 0
    assert "no node is running with the data dir" in result.stderr
