"""A gang assignment on four real nodes: three sandboxed members step together and match the one-process run."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest

from frost_core.api.commands import SaveSettings
from frost_core.api.errors import CheckpointError, FrostError
from frost_core.node.control import call_node
from frost_core.plugin.gang import run_gang_locally
from frost_core.plugin.loader import load_plugin_file
from frost_core.storage.checkpoints import read_record

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


def checkpoint_seqs(folder) -> set[int]:
    """The seqs of the checkpoint files in `folder` that read whole (one being written does not)."""
    seqs = set()
    for path in folder.glob("*.ckpt"):
        with contextlib.suppress(CheckpointError, OSError):
            seqs.add(read_record(path).seq)
    return seqs


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


def set_owner_policy(node, policy: str, **more: object) -> None:
    call_node(node.paths, SaveSettings(values={"owner.policy": policy, **{f"owner.{k}": v for k, v in more.items()}}))


def machine_down(node) -> None:
    """kill -9 of a node and every process under it (its guests too), as when its machine loses power."""
    try:
        below = psutil.Process(node.process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        below = []
    node.kill()
    for process in below:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()


HOG = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass\n"


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
                     what="the gang moved", show=gang)
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


def test_an_owner_hog_moves_a_gang_within_a_check_and_kill_9_of_a_host_restarts_it_both_bit_identical(nodes, tmp_path):
    """A gang checking every 3 s (the submitter's cadence): an owner hog on one member's host moves it to the
    other three within a check interval; then kill -9 of a member's host mid-superstep restarts it from its
    last global checkpoint. It ends as the one-process run does."""
    master = nodes("master", extra_config=CLUSTER_CONFIG + OWNER_AWAY)
    hosts = [nodes(name, seeds=(master.address,), extra_config=CLUSTER_CONFIG + OWNER_AWAY)
             for name in ("alpha", "beta", "gamma")]
    every = {node.node_id: node for node in (master, *hosts)}
    wait_for_members([master, *hosts])
    gang_id, running = place_gang(master, slow_heat(tmp_path), "slow-heat", HEAT, nodes=4, check_interval=3.0)
    gang = lambda: assignment(master, gang_id)["gang"]   # noqa: E731
    with pytest.raises(FrostError, match="not a cadence"):
        master.call("submit", plugin="slow-heat", params=HEAT, check_interval=-1.0)
    # The owner of one member's host (not the master's) sits down and works. All four nodes share this one
    # machine, so only the node whose owner policy watches (the default, `share`) may take the hog for its
    # owner's; the other three keep `always` (on a desk each node would have its own machine and owner).
    hogged = next(every[m["host"]] for m in running["members"] if m["host"] != master.node_id)
    # A timer out of the test's way: the owner counts as gone after 1 quiet second, not 30.
    set_owner_policy(hogged, "share", resume_after=1.0)
    started = time.monotonic()
    hogs = [subprocess.Popen([sys.executable, "-c", HOG], start_new_session=True) for _ in range(os.cpu_count() or 1)]
    try:
        # Its member stops at once (the owner never waits) and cannot reach the barrier: at the next check
        # the gang starts again from its last global checkpoint on the other three.
        wait_for(lambda: hogged.call("status")["state"] == "owner-active", timeout=30, what="the hog seen as the owner's")
        seen = time.monotonic()
        since = lambda: (f"{time.monotonic() - started:.1f} s after the hog started, "   # noqa: E731
                         f"{time.monotonic() - seen:.1f} s after its host held the member", gang())
        wait_for(lambda: gang()["restarts"] == 1, timeout=30, what="the gang leaving the held host (check every 3 s)",
                 show=since)
        gone = time.monotonic() - seen
        # It runs on the other three as soon as they offer CPU (the hogs take it from every node's guests).
        left = wait_for(lambda: (g := gang())["restarts"] == 1 and g["phase"] == "running"
                        and hogged.node_id not in {m["host"] for m in g["members"]} and g, timeout=60,
                        what="the gang running off the hogged host", show=since)
        took = time.monotonic() - started
        assert hogged.call("status")["state"] == "owner-active"
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    print(f"hog start -> gang running on the other three: {took:.1f} s; host held its member -> gang left it: "
          f"{gone:.1f} s (check interval 3 s)")
    # The owner of another member's host finishes (`f`: take nothing new, pause once the guests are done): a
    # gang member would not be done soon, so the gang leaves at its next barrier (a global checkpoint there)
    # and the host pauses once no member is left. Meanwhile the master's member straggles, so the gang
    # cannot finish first.
    ours = next(m for m in left["members"] if m["host"] == master.node_id)
    finishing = every[next(m["host"] for m in left["members"] if m["host"] != master.node_id)]
    victim = next(m for m in left["members"] if m["host"] not in (master.node_id, finishing.node_id))
    pid = wait_for(lambda: member_pid(master, f"{gang_id}.{ours['rank']}", from_checkpoint=False), timeout=30,
                   what="the master's member")
    with straggling(pid):
        # Back to `always` for the rest: the other work on this shared machine must not keep it owner-active.
        set_owner_policy(hogged, "always")
        # All four offer CPU again (the hogs took it from every node's guests): the gang has a host to go to.
        wait_for(lambda: len([p for p in master.call("peers") if p["state"] == "alive" and p["available"] > 0]) == 4,
                 timeout=60, what="4 nodes offering CPU after the hog")
        assert "1 gang member leave" in finishing.call("finish")
    moved = wait_for(lambda: (g := gang())["phase"] == "running" and g["checkpoint_superstep"] and g, timeout=60,
                     what="the gang off the finishing host, from a global checkpoint", show=gang)
    assert finishing.node_id not in {m["host"] for m in moved["members"]} and moved["restarts"] == 1, moved
    wait_for(lambda: finishing.call("status")["state"] == "paused", timeout=30, what="the finished host paused")
    assert any("hosting is paused" in e["message"] for e in finishing.call("events"))

    # It resumes; the host of another member (not the master's) goes down while that member is inside a
    # superstep (SIGSTOP holds it there): the gang restarts from its last global checkpoint on the other three.
    finishing.call("resume")
    wait_for(lambda: len([p for p in master.call("peers") if p["state"] == "alive" and p["available"] > 0]) == 4,
             timeout=60, what="4 nodes offering CPU after the resume")
    rank = victim["rank"]
    down_id = wait_for(lambda: (g := gang())["phase"] == "running" and g["members"][rank]["host"], timeout=30,
                       what="the doomed member placed")
    down = every[down_id]
    pid = wait_for(lambda: member_pid(down, f"{gang_id}.{rank}", from_checkpoint=True), timeout=30,
                   what="the doomed member's guest")

    def stopped_mid_superstep():
        """SIGSTOP the member; keep it stopped only if it has not reported its superstep (in flight: 0.5 s)."""
        os.kill(pid, signal.SIGSTOP)
        time.sleep(0.5)
        if (g := gang())["members"][rank]["at_barrier"]:
            os.kill(pid, signal.SIGCONT)
            return None
        return g

    before = wait_for(stopped_mid_superstep, timeout=30, what="the doomed member caught inside a superstep")
    assert before["members"][rank]["host"] == down_id, before
    machine_down(down)
    restarted = wait_for(lambda: (g := gang())["restarts"] == 2 and g["phase"] == "running" and g, timeout=60,
                         what="the gang restarted after its member's host went down", show=gang)
    assert down_id not in {m["host"] for m in restarted["members"]}, restarted
    assert restarted["checkpoint_superstep"] == before["checkpoint_superstep"]   # its last global checkpoint
    assert restarted["superstep"] == before["checkpoint_superstep"], restarted
    wait_for(lambda: assignment(master, gang_id)["state"] == "done", timeout=90, what="the second gang's result")
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
    folder = master.data_dir / "gang-checkpoints" / gang_id

    # The master's machine goes down (kill -9) while alpha's member straggles, so the gang cannot finish
    # first, and comes back: the gang resumes from the checkpoint on its disk, not from its first superstep,
    # over the members of its earlier life still on alpha, and ends as the reference does.
    pid = wait_for(lambda: member_pid(host, f"{gang_id}.{away}", from_checkpoint=True), timeout=30,
                   what="alpha's member from the checkpoint")
    with straggling(pid):
        wait_for(lambda: kept in checkpoint_seqs(folder), timeout=30, what=f"superstep {kept}'s file in {folder}")
        master.kill()
    master = nodes("master", extra_config=CLUSTER_CONFIG + OWNER_AWAY, port=port, seeds=(host.address,))
    wait_for(lambda: assignment(master, gang_id)["state"] == "done", timeout=120, what="the gang's result")
    assert any(f"starts again from superstep {kept}, its last global checkpoint" in e["message"]
               for e in master.call("events")), master.call("events")
    assert kept > 0
    wait_for(lambda: not folder.exists(), timeout=30, what="the checkpoint removed once the gang ended")
    output = run_gang_locally(load_plugin_file(PLUGINS / "heat_diffusion.py"), params)
    assert result_sha256(master, gang_id, tmp_path) == hashlib.sha256(output.data).hexdigest()
