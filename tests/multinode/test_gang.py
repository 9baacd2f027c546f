"""A gang assignment on four real nodes: three sandboxed members step together and match the one-process run."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import time

import pytest

from frost_core.plugin.gang import run_gang_locally
from frost_core.plugin.loader import load_plugin_file

from tests.multinode.cluster import (
    CLUSTER_CONFIG, PLUGINS, assignment, place_gang, result_sha256, wait_for_members,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(240)

# Not about the owner: these nodes share one machine with other work (and with each other), which
# the default `share` policy would rightly take for a busy owner and keep the guests from.
OWNER_AWAY = '\n[owner]\npolicy = "always"\nmemory_pressure = 100\n'
HEAT = {"height": "12", "width": "6", "members": "3", "iterations": "24"}


def slow_heat(folder) -> str:
    """heat-diffusion whose every superstep takes at least 0.3 s (same output): the moments below, when the
    test stops a member, fall within its run even on an idle machine."""
    source = (PLUGINS / "heat_diffusion.py").read_text()
    step = "    def step(self, state: dict, rank: int, size: int, inbox: dict) -> Superstep:\n"
    assert step in source and 'name = "heat-diffusion"' in source
    path = folder / "slow_heat.py"
    path.write_text(source.replace(step, step + '        __import__("time").sleep(0.3)\n')
                    .replace('name = "heat-diffusion"', 'name = "slow-heat"'))
    return str(path)


def reference_sha256() -> str:
    output = run_gang_locally(load_plugin_file(PLUGINS / "heat_diffusion.py"), HEAT)
    return hashlib.sha256(output.data).hexdigest()


def member_pid(node, task_id: str, *, from_checkpoint: bool) -> int | None:
    """The pid of the last guest started for gang member `task_id` (of any epoch) on `node` (afresh, or from a checkpoint)."""
    pids = [int(m.group(1)) for e in node.call("events") if re.match(rf"{re.escape(task_id)}-e\d+: gang member", e["message"])
            and ("from its checkpoint" in e["message"]) == from_checkpoint
            and (m := re.search(r"\(pid (\d+)\)", e["message"]))]
    return pids[-1] if pids else None


@contextlib.contextmanager
def straggling(pid: int):
    """The member's guest stops (SIGSTOP) until the block ends: the gang waits for it at the barrier, so
    whatever the owner does meanwhile lands before the gang can finish, however fast the machine."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):   # its gang may have ended it meanwhile
            os.kill(pid, signal.SIGCONT)


def test_a_gang_moves_and_restarts_from_its_global_checkpoint_and_ends_bit_identical(nodes, tmp_path):
    master = nodes("master", extra_config=CLUSTER_CONFIG + OWNER_AWAY)
    hosts = [nodes(name, seeds=(master.address,), extra_config=CLUSTER_CONFIG + OWNER_AWAY)
             for name in ("alpha", "beta", "gamma")]
    every = {node.node_id: node for node in (master, *hosts)}
    wait_for_members([master, *hosts])
    # All four can take a member (each has measured its machine), so the move below has a host to go to.
    gang_id, running = place_gang(master, slow_heat(tmp_path), "slow-heat", HEAT, nodes=4)
    gang = lambda: assignment(master, gang_id)["gang"]   # noqa: E731

    # Three members on three distinct nodes. Member 2 straggles; meanwhile the owner moves member 0: at
    # the next barrier all three checkpoint (a global checkpoint at the master) and the gang leaves its host.
    hosts_of = {m["rank"]: every[m["host"]] for m in running["members"]}
    pid = wait_for(lambda: member_pid(hosts_of[2], f"{gang_id}.2", from_checkpoint=False), timeout=30,
                   what="member 2's guest")
    with straggling(pid):
        master.cli("move", f"{gang_id}.0", "master")
    moved = wait_for(lambda: (g := gang())["moves"] == 1 and g["phase"] == "running" and g, timeout=60,
                     what="the gang moved")
    left = running["members"][0]["host"]
    assert moved["checkpoint_superstep"] >= 1 and left not in {m["host"] for m in moved["members"]}

    # The owner of another member's host evicts mid-run (member 2 straggling again): the gang restarts
    # from that checkpoint on the three others.
    hosts_of = {m["rank"]: every[m["host"]] for m in moved["members"]}
    evicted = next(m["host"] for m in moved["members"] if m["rank"] != 2)
    pid = wait_for(lambda: member_pid(hosts_of[2], f"{gang_id}.2", from_checkpoint=True), timeout=30,
                   what="member 2's guest after the move")
    with straggling(pid):
        every[evicted].cli("evict")
        wait_for(lambda: gang()["restarts"] == 1, timeout=30, what="the gang restarted")

    # The owner of a member's host pauses (p): that member's guest stops at once like any guest's, and the
    # gang waits at its barrier (the superstep under way may end, no more) until the owner resumes.
    restarted = gang()
    hosts_of = {m["rank"]: every[m["host"]] for m in restarted["members"]}
    pid = wait_for(lambda: (p := member_pid(hosts_of[2], f"{gang_id}.2", from_checkpoint=True)) and p != pid and p,
                   timeout=30, what="member 2's guest after the restart")
    with straggling(pid):
        hosts_of[1].call("pause")
    held = gang()["superstep"]
    time.sleep(3)   # a window to watch: unpaused, the gang would go through several 0.3 s supersteps in it
    assert gang()["superstep"] <= held + 1 and assignment(master, gang_id)["state"] == "running", gang()
    hosts_of[1].call("resume")
    wait_for(lambda: assignment(master, gang_id)["state"] == "done", timeout=90, what="the gang's result")
    done = gang()
    assert done["restarts"] == 1 and evicted not in {m["host"] for m in done["members"]}, done
    assert done["checkpoint_superstep"] == moved["checkpoint_superstep"]
    assert result_sha256(master, gang_id, tmp_path) == reference_sha256()


def test_a_gang_whose_master_restarts_resumes_from_its_global_checkpoint_and_ends_bit_identical(nodes, tmp_path):
    master = nodes("master", extra_config=CLUSTER_CONFIG + OWNER_AWAY)
    port = int(master.address.rsplit(":", 1)[1])
    host = nodes("alpha", seeds=(master.address,), extra_config=CLUSTER_CONFIG + OWNER_AWAY)
    wait_for_members([master, host])
    master.cli("plugins", "add", slow_heat(tmp_path))
    params = {**HEAT, "members": "2", "iterations": "18"}
    gang_id = master.call("submit", plugin="slow-heat", params=params)["id"]
    gang = lambda: assignment(master, gang_id)["gang"]   # noqa: E731
    running = wait_for(lambda: (g := gang())["phase"] == "running" and all(m["host"] for m in g["members"]) and g,
                       timeout=60, what="the gang placed")
    away = next(m["rank"] for m in running["members"] if m["host"] == host.node_id)

    # The owner moves a member while the one on alpha straggles: at the next barrier both checkpoint (with two
    # hosts for two members the gang stays where it is) and the master keeps that global checkpoint on disk.
    pid = wait_for(lambda: member_pid(host, f"{gang_id}.{away}", from_checkpoint=False), timeout=30,
                   what="alpha's member")
    with straggling(pid):
        master.cli("move", f"{gang_id}.{1 - away}", "alpha")
    kept = wait_for(lambda: (g := gang())["checkpoint_superstep"] and g["checkpoint_superstep"], timeout=60,
                    what="a global checkpoint")
    on_disk = master.data_dir / "gang-checkpoints" / gang_id / f"{kept:016d}.ckpt"

    # The master's machine goes down (kill -9) while alpha's member straggles, so the gang cannot finish
    # first, and comes back: the gang resumes from the checkpoint on its disk, not from its first superstep,
    # over the members of its earlier life still on alpha, and ends as the reference does.
    pid = wait_for(lambda: member_pid(host, f"{gang_id}.{away}", from_checkpoint=True), timeout=30,
                   what="alpha's member from the checkpoint")
    with straggling(pid):
        wait_for(on_disk.exists, timeout=30, what=f"{on_disk} written")
        master.kill()
    master = nodes("master", extra_config=CLUSTER_CONFIG + OWNER_AWAY, port=port, seeds=(host.address,))
    wait_for(lambda: assignment(master, gang_id)["state"] == "done", timeout=120, what="the gang's result")
    assert any(f"starts again from superstep {kept}, its last global checkpoint" in e["message"]
               for e in master.call("events")), master.call("events")
    assert kept > 0
    wait_for(lambda: not on_disk.parent.exists(), timeout=30, what="the checkpoint removed once the gang ended")
    output = run_gang_locally(load_plugin_file(PLUGINS / "heat_diffusion.py"), params)
    assert result_sha256(master, gang_id, tmp_path) == hashlib.sha256(output.data).hexdigest()
