"""A node whose seed has another cluster key says so, in `status`, in Events and in its log."""

from frost_core import ClusterKey
from tests.waiting import wait_for


def test_a_node_with_the_wrong_key_is_told_why_its_seed_refused_it(nodes, tmp_path):
    first = nodes("first")
    other_key = tmp_path / "other.key"
    ClusterKey.generate().save(other_key)
    outsider = nodes("outsider", key_file=other_key, seeds=(first.address,))
    expected = f"seed {first.address} refused us: different cluster key; the nodes of a cluster share one key: " \
               "`frost-tui key show` on one prints its code, `frost-tui key set CODE` on the other (a running node " \
               "switches at once; or Join on its Settings tab)"
    status = wait_for(lambda: (s := outsider.cli("status")).stdout.count(expected) and s, timeout=30,
                      what="the refusal in `status`")
    assert f"Problem   {expected}" in status.stdout
    assert any(e["message"] == expected and e["severity"] == "error" for e in outsider.call("events"))
    assert expected in (outsider.data_dir / "logs" / "frost-tui.log").read_text()
    assert first.call("status")["problems"] == []
