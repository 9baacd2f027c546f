"""A gang plugin's declared member memory is its members' limit on a real node: one that exceeds it fails the gang."""

from __future__ import annotations

import textwrap
import time

import pytest

from tests.waiting import wait_for

pytestmark = pytest.mark.process

HUNGRY = textwrap.dedent(
    """
    from frost_core import GangPlugin, Output, Param, Superstep

    class Hungry(GangPlugin):
        name = "hungry"
        version = "1"
        params = (Param("memory_mb", int, 48, "what each member declares"),)

        def members(self, params):
            return 1

        def member_memory(self, params):
            return params["memory_mb"] << 20

        def start(self, params, rank, size):
            return 0

        def step(self, state, rank, size, inbox):
            if state == 1:
                state = len([b"x" * (8 << 20) for _ in range(20)])  # 160 MiB: within the default 256, not 48
            return Superstep(state + 1, {}, done=state > 1)

        def finish(self, state, rank, size):
            return state

        def combine(self, params, results):
            return Output(str(results).encode(), "text/plain", "out.txt")

    plugin = Hungry()
    """
)


def test_a_member_over_its_plugins_declared_memory_fails_the_gang_naming_rank_superstep_and_limit(single_node, tmp_path):
    # Not about the owner: the member must run on a machine busy with other work, which the default
    # `share` policy would rightly keep it from.
    node = single_node('\n[owner]\npolicy = "always"\nmemory_pressure = 100\n')
    path = tmp_path / "hungry.py"
    path.write_text(HUNGRY)
    node.cli("plugins", "add", str(path))
    gang_id = node.call("submit", plugin="hungry", params={})["id"]
    failed = wait_for(lambda: (a := node.call("assignment", assignment=gang_id))["state"] == "failed" and a,
                      timeout=60, what="the gang to fail")
    assert ("superstep 1: rank 0: memory: the guest was killed by its memory cgroup: it used more than its "
            "declared 48 MiB") in failed["error"], failed
    assert any("a gang of 1 hungry members of 48 MiB each" in e["message"] for e in node.call("events"))


HOLDER = textwrap.dedent(
    """
    import time

    from frost_core import GangPlugin, Output, Superstep

    class Holder(GangPlugin):
        name = "holder"
        version = "1"
        params = ()

        def members(self, params):
            return 1

        def member_memory(self, params):
            return 40 << 20

        def start(self, params, rank, size):
            return 0

        def step(self, state, rank, size, inbox):
            time.sleep(0.25)
            return Superstep(state + 1, {}, done=state + 1 >= 28)   # seven seconds in all

        def finish(self, state, rank, size):
            return state

        def combine(self, params, results):
            return Output(str(results).encode(), "text/plain", "out.txt")

    plugin = Holder()
    """
)


def test_a_gang_member_holds_its_declared_memory_in_the_pool_and_a_unit_that_does_not_fit_beside_it_waits(
        single_node, tmp_path):
    # Not about the owner: the guests must run on a machine busy with other work, which the default `share` policy
    # would rightly keep them from. A 50 MiB pool: the 40 MiB member leaves no room for a 16 MiB unit beside it.
    node = single_node('\n[owner]\npolicy = "always"\nmemory_pressure = 100\n[guests]\nmemory_pool_mb = 50\n')
    path = tmp_path / "holder.py"
    path.write_text(HOLDER)
    node.cli("plugins", "add", str(path))
    gang_id = node.call("submit", plugin="holder", params={})["id"]
    wait_for(lambda: node.call("assignment", assignment=gang_id)["gang"]["superstep"] >= 1, timeout=60,
             what="the member stepping")
    pi_id = node.call("submit", plugin="montecarlo-pi", params={"samples": 100_000, "units": 1})["id"]

    def pi_unit() -> dict:
        return node.call("assignment", assignment=pi_id)["units"][0]

    time.sleep(3.0)   # long enough for the unit to be placed, were there room
    while node.call("assignment", assignment=gang_id)["state"] == "running":
        unit = pi_unit()
        assert unit["state"] == "queued", f"a 16 MiB unit ran beside a 40 MiB member in a 50 MiB pool: {unit}"
        assert unit["waiting"] in ("", "needs 16 MiB, largest free 10 MiB"), unit   # (blank before its first round)
        time.sleep(0.5)
    assert node.call("assignment", assignment=gang_id)["state"] == "done"
    wait_for(lambda: node.call("assignment", assignment=pi_id)["state"] == "done", timeout=60,
             what="the unit run once the member left its memory")
