"""Any one machine may die or vanish mid-run: no unit is lost and each unit's result is accepted once."""

from __future__ import annotations

import collections
import json
import os
import threading
import time
from pathlib import Path

import pytest

from frost_core.api.errors import NodeUnavailableError
from tests.multinode.cluster import (
    CLUSTER_CONFIG, RAYTRACE, assignment, reference_sha256, result_sha256, running_units, wait_for_members,
)
from tests.netns import Topology, require_netns
from tests.nodes import FAST_CONFIG
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(300)

# The failure detector, tightened so a dead host is declared within a few seconds.
FAST_DEATH = FAST_CONFIG.replace("[gossip]\n", "[gossip]\nprobe_interval = 0.2\nprobe_timeout = 0.1\n"
                                 "suspicion_multiplier = 4\n").replace("suspicion_min = 3", "suspicion_min = 2")

# Not about the owner: these nodes share one machine with other work (and with each other), which
# the default `share` policy would rightly take for a busy owner and keep the guests from; the
# owner policy's own tests are tests/process/test_owner.py, on the defaults.
OWNER_AWAY = '\n[owner]\npolicy = "always"\nmemory_pressure = 100\n'


def accepted_results(master, assignment_id: str) -> collections.Counter:
    """How many times the master accepted a result for each unit, from its event log (a unit a second host
    checked, as `cluster.verify` draws 2 % of them, is accepted as "result verified")."""
    counts: collections.Counter = collections.Counter()
    for event in master.call("events"):
        text = event["message"]
        if text.startswith(f"{assignment_id}.") and (" result accepted" in text or " result verified" in text):
            counts[text.split()[0]] += 1
    return counts


def assert_complete_and_identical(master, assignment_id: str, tmp_path, params: dict = RAYTRACE) -> None:
    wait_for(lambda: assignment(master, assignment_id)["state"] == "done", timeout=150, what="the assignment")
    record = assignment(master, assignment_id)
    assert all(u["state"] == "done" for u in record["units"]), "a unit was lost"
    assert set(accepted_results(master, assignment_id).values()) == {1}
    assert len(accepted_results(master, assignment_id)) == len(record["units"])
    assert result_sha256(master, assignment_id, tmp_path) == reference_sha256("raytrace", params)


class GuestCpu(threading.Thread):
    """The CPU-seconds of one guest process, read from /proc every 20 ms until it exits."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self._stat = Path(f"/proc/{pid}/stat")
        self.seconds = 0.0

    def run(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        while True:
            try:
                fields = self._stat.read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                return
            self.seconds = (int(fields[11]) + int(fields[12])) / tick    # utime + stime
            time.sleep(0.02)


class CheckpointSampler(threading.Thread):
    """The CPU-seconds at which a node's guest of one unit took each checkpoint, as its host shows them
    (its CPU time less its CPU time since its last checkpoint), polled until stopped."""

    def __init__(self, node, task_id: str) -> None:
        super().__init__(daemon=True)
        self._node = node
        self._task_id = task_id
        self._ended = threading.Event()
        self.taken: list[float] = []

    def run(self) -> None:
        while not self._ended.wait(0.1):
            try:
                guests = self._node.call("status")["guests"]
            except NodeUnavailableError:  # slow to answer on a loaded machine (or stopped after a failure)
                continue
            for guest in guests:
                at = guest["cpu_seconds"] - guest["cpu_since_checkpoint_seconds"]
                if guest["task_id"] == self._task_id and guest["checkpoint_bytes"] and \
                        (not self.taken or at > self.taken[-1] + 0.005):
                    self.taken.append(at)

    def finish(self) -> None:
        self._ended.set()
        self.join()


def guest_pid(host) -> int:
    """The pid of the one guest running on `host`, from its event log. (The master counts a unit running once
    placed; the host starts its guest a moment later, after fetching the plugin.)"""
    guests = wait_for(lambda: host.call("status")["guests"], timeout=10, what=f"a guest on {host.name}")
    task = guests[0]["task_id"]
    started = wait_for(lambda: events(host, f"{task}: guest raytrace"), timeout=10, what="the guest's pid")
    return int(started[0].split("(pid ")[1].rstrip(")"))


def ledger_with(node, peer_id: str) -> dict:
    """What `node`'s ledger (`frost-tui stats --json`) says it gave to and received from `peer_id`."""
    peers = json.loads(node.cli("stats", "--json").stdout)["result"]["peers"]
    return next((p for p in peers if p["node_id"] == peer_id), {"given": 0.0, "received": 0.0})


def events(node, prefix: str) -> list[str]:
    return [e["message"] for e in node.call("events") if e["message"].startswith(prefix)]


# The cut unit must still have seconds of work left when the replacement starts, whichever copy wins.
LONGER = {"width": 1024, "height": 64, "rows_per_unit": 32, "samples": 5}


def test_kill_9_of_a_host_restarts_its_unit_elsewhere_from_its_replicated_checkpoint(nodes, tmp_path):
    config = CLUSTER_CONFIG.replace("[checkpoints]\n", "[checkpoints]\nreplica_peers = 1\n")
    master = nodes("master", extra_config=config + OWNER_AWAY, base_config=FAST_DEATH)
    hosts = [nodes(n, seeds=(master.address,), extra_config=config + OWNER_AWAY, base_config=FAST_DEATH)
             for n in ("alpha", "beta")]
    wait_for_members([master, *hosts])
    master.call("pause")  # both units run on the hosts
    assignment_id = master.call("submit", plugin="raytrace", params=RAYTRACE)["id"]
    wait_for(lambda: len(running_units(master, assignment_id)) == 2, timeout=30, what="both units running")
    victim, other = hosts
    doomed_task = victim.call("status")["guests"][0]["task_id"]
    # With one extra holder, the other host keeps copies of the doomed unit's checkpoints too.
    wait_for(lambda: list((other.data_dir / "held-replicas" / doomed_task).glob("*.ckpt")),
             timeout=20, what="a copy of the doomed unit's checkpoint on the other host")
    master.call("resume")
    victim.kill()
    assert_complete_and_identical(master, assignment_id, tmp_path)
    messages = [e["message"] for e in master.call("events")]
    assert any("restarts elsewhere" in m for m in messages)
    assert any("placed" in m and "from checkpoint" in m for m in messages), "restarted from scratch, not a replica"


def test_kill_9_of_the_master_then_restart_hosts_hold_results_and_deliver_them(nodes, tmp_path):
    master = nodes("master", extra_config=CLUSTER_CONFIG + OWNER_AWAY)
    port = int(master.address.rsplit(":", 1)[1])
    hosts = [nodes(n, seeds=(master.address,), extra_config=CLUSTER_CONFIG + OWNER_AWAY) for n in ("alpha", "beta")]
    wait_for_members([master, *hosts])
    master.call("pause")
    # No unit checked by a second host (verify 0): a check is a second placement by design, which could
    # land on the restarted master; this test shows that no unit was computed again (2 % drew one).
    assignment_id = master.call("submit", plugin="raytrace", params=RAYTRACE, verify=0.0)["id"]
    wait_for(lambda: len(running_units(master, assignment_id)) == 2, timeout=30, what="both units running")
    master_id = master.node_id
    guest_cpu = [GuestCpu(guest_pid(host)) for host in hosts]   # what each guest really used, from /proc
    for thread in guest_cpu:
        thread.start()
    master.kill()
    # The hosts finish their units with nobody to deliver to, and keep the results.
    for host in hosts:
        wait_for(lambda host=host: not host.call("status")["guests"], timeout=90, what="the hosts to finish")
    # kill -9 of the hosts too, so every node of the cluster restarts: their ledgers (and their held results)
    # survive it.
    host_ports = [int(host.address.rsplit(":", 1)[1]) for host in hosts]
    for host in hosts:
        host.kill()
    hosts[0] = nodes("alpha", extra_config=CLUSTER_CONFIG + OWNER_AWAY, port=host_ports[0])
    hosts[1] = nodes("beta", seeds=(hosts[0].address,), extra_config=CLUSTER_CONFIG + OWNER_AWAY, port=host_ports[1])
    master = nodes("master", extra_config=CLUSTER_CONFIG + OWNER_AWAY, port=port, seeds=(hosts[0].address,))
    master.call("resume")
    assert_complete_and_identical(master, assignment_id, tmp_path)
    assert all(u["host"] != master.node_id for u in assignment(master, assignment_id)["units"]), \
        "a unit was computed again instead of delivered"
    # The ledger: each host gave the master what its guest used (within 5 %, in speed units), and once the
    # hosts' signed summaries reach the master it counts what it received from each alike.
    speed = json.loads(master.paths.extremities_file.read_text())["speed"]
    for host, thread in zip(hosts, guest_cpu):
        thread.join(timeout=10)
        really = thread.seconds * speed
        given = ledger_with(host, master_id)["given"]
        assert really > 0.5 and abs(given - really) <= 0.05 * really, (host.name, given, really)
        wait_for(lambda host=host, given=given: abs(ledger_with(master, host.node_id)["received"] - given)
                 <= 0.05 * given, timeout=30, what=f"the master's count of what {host.name} gave it")


@pytest.mark.netns
def test_a_host_cut_off_is_replaced_and_its_stale_copy_stops_when_it_heals(nodes, tmp_path, reference_ahead):
    require_netns()
    reference_ahead("raytrace", LONGER)   # (the nodes run with the owner policy `always`)
    with Topology(3) as topology:
        def start(i, name, seeds=()):
            host = topology.hosts[i]
            # The owner policy out of the way: the nodes on this one machine (and a CI box short of memory)
            # would count as a busy owner.
            return nodes(name, netns=host.namespace, listen_host="0.0.0.0", port=47700, seeds=seeds,
                         base_config=FAST_DEATH,
                         extra_config=CLUSTER_CONFIG + f'\n[node]\nadvertise_host = "{host.address}"\n'
                         '\n[owner]\npolicy = "always"\nmemory_pressure = 100\n')
        master = start(0, "master")
        alpha = start(1, "alpha", seeds=(master.address,))
        beta = start(2, "beta", seeds=(master.address,))
        wait_for_members([master, alpha, beta])
        master.call("pause")
        # No unit checked by a second host (verify 0): the check's copy starts afresh by design, and this
        # test reads which checkpoint the cut unit's replacement resumed from (2 % of units drew one).
        assignment_id = master.call("submit", plugin="raytrace", params=LONGER, verify=0.0)["id"]
        wait_for(lambda: len(running_units(master, assignment_id)) == 2, timeout=30, what="both units running")
        cut_task = alpha.call("status")["guests"][0]["task_id"]
        wait_for(lambda: events(alpha, f"{cut_task}: guest raytrace"), timeout=10, what="the cut copy's pid")
        guest_cpu = GuestCpu(int(events(alpha, f"{cut_task}: guest raytrace")[0].split("(pid ")[1].rstrip(")")))
        guest_cpu.start()
        checkpoints = CheckpointSampler(alpha, cut_task)
        checkpoints.start()
        # Cut once the master holds a checkpoint of it: the replacement resumes from there.
        wait_for(lambda: list((master.data_dir / "replicas" / cut_task).glob("*.ckpt")), timeout=30,
                 what="a replica of the cut unit's checkpoint on the master")
        master.call("resume")
        topology.cut(topology.hosts[1])
        wait_for(lambda: any(u["task_id"] == cut_task and u["host"] != alpha.node_id
                             for u in assignment(master, assignment_id)["units"]),
                 timeout=40, what="the cut-off unit to be placed elsewhere")
        # The cut lasts until the replacement's result is in (the cut lasts 30 s): the cut-off
        # copy ran on all along, and what it did past the checkpoint the replacement resumed from is lost.
        wait_for(lambda: any(u["task_id"] == cut_task and u["state"] == "done"
                             for u in assignment(master, assignment_id)["units"]),
                 timeout=90, what="the replacement's result")
        topology.heal(topology.hosts[1])
        healed = time.monotonic()
        wait_for_members([master, alpha, beta], timeout=60)
        reformed = time.monotonic() - healed
        assert_complete_and_identical(master, assignment_id, tmp_path, LONGER)
        assert reformed < 15, f"the cluster took {reformed:.1f} s to re-form after the heal"
        # Healed, the old copy learned it was superseded (or its late result was refused): nothing runs there.
        wait_for(lambda: not alpha.call("status")["guests"], timeout=30, what="the stale copy to stop")
        guest_cpu.join(timeout=30)
        checkpoints.finish()
        # The cut-off copy's work past the checkpoint its replacement resumed from was thrown away: all
        # its guest used (from /proc) less its CPU time when it took that checkpoint (its host's figure).
        # The master counts it within 10 %, though the copy's CPU-seconds per unit of progress changed
        # as it went and it was often last heard before that checkpoint: the replica says at what CPU
        # time it was taken (a guess from the copy's rate, skewed by its process's start, was off by up
        # to 90 % on a quiet machine), and a stopped copy's last figure comes after its stop.
        assert not events(master, f"{cut_task} result accepted: finished on {alpha.node_id[:8]}")
        resumed = int(events(master, f"{cut_task} placed ")[-1].split(" from checkpoint ")[1].split()[0])
        assert len(checkpoints.taken) >= resumed, f"the sampler missed a checkpoint: {checkpoints.taken}"
        really = guest_cpu.seconds - checkpoints.taken[resumed - 1]
        assert really > 1.0, f"too little was thrown away to compare ({really:.2f} CPU-s)"
        wait_for(lambda: abs(assignment(master, assignment_id)["wasted_seconds"] - really) <= 0.1 * really,
                 timeout=10, what=f"the master's wasted-work figure ({assignment(master, assignment_id)['waste']}) "
                 f"to be within 10 % of {really:.2f} CPU-s ({guest_cpu.seconds:.2f} in all, checkpoint "
                 f"{resumed} taken at {checkpoints.taken})")
        for node in (master, alpha, beta):
            node.stop()
