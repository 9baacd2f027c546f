"""Units spread over real peers, move between them while they run, and the image stays bit-identical."""

from __future__ import annotations

import contextlib
import re

import pytest

from frost_core.api.errors import CheckpointError
from frost_core.storage.checkpoints import read_record

from tests.multinode.cluster import (
    CLUSTER_CONFIG, RAYTRACE, assignment, params_args, reference_sha256, result_sha256, running_units,
    wait_for_members,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(240)

# Not about the owner: these nodes share one machine with other work (and with each other), which
# the default `share` policy would rightly take for a busy owner and keep the guests from; the
# owner policy's own tests are tests/process/test_owner.py, on the defaults.
OWNER_AWAY = '\n[owner]\npolicy = "always"\nmemory_pressure = 100\n'


@pytest.fixture
def trio_cluster(nodes):
    master = nodes("master", extra_config=CLUSTER_CONFIG + OWNER_AWAY)
    seed = master.address
    hosts = [nodes(name, seeds=(seed,), extra_config=CLUSTER_CONFIG + OWNER_AWAY) for name in ("alpha", "beta")]
    wait_for_members([master, *hosts])
    return master, hosts


def submit(master, params, *extra) -> str:
    out = master.cli("submit", "raytrace", *params_args(params), *extra).stdout
    return out.split()[1] if out.startswith("Submitted") else out.strip().split()[-1]


def test_units_spread_over_peers_and_moves_back_and_forth_keep_the_image_identical(trio_cluster, tmp_path,
                                                                                   reference_ahead):
    reference_ahead("raytrace", RAYTRACE)   # (the nodes run with OWNER_AWAY)
    master, (alpha, beta) = trio_cluster
    names = {node.node_id: node.data_dir.name for node in (master, alpha, beta)}
    reply = master.call("submit", plugin="raytrace", params=RAYTRACE)
    assignment_id = reply["id"]
    # Each node gives guests one CPU: the two units land on two different machines at once.
    running = wait_for(lambda: len({u["host"] for u in running_units(master, assignment_id)}) == 2
                       and running_units(master, assignment_id), timeout=30, what="both units running")
    # Hosts report progress: the master shows each running unit's progress and time left.
    wait_for(lambda: any(u["eta_seconds"] and 0 < u["progress"] < 1 for u in running_units(master, assignment_id)),
             timeout=20, what="a running unit's progress and ETA at the master")
    unit = running[0]
    first_host = unit["host"]
    idle = next(n for n in (master, alpha, beta) if n.node_id not in {u["host"] for u in running})
    # Forth: to the idle peer; back: to where it came from. The master's CLI moves it wherever it runs.
    master.cli("move", unit["task_id"], names[idle.node_id])
    wait_for(lambda: next(u for u in assignment(master, assignment_id)["units"]
                          if u["task_id"] == unit["task_id"])["host"] == idle.node_id,
             timeout=15, what="the master to learn the new host")
    assert unit["task_id"] in {g["task_id"] for g in idle.call("status")["guests"]}
    # Back, asked of the host it left: that host forwards the command to where the unit went.
    first = next(n for n in (master, alpha, beta) if n.node_id == first_host)
    moved_back = first.cli("move", unit["task_id"], names[first_host], check=False)
    done_meanwhile = assignment(master, assignment_id)["units"][unit["index"]]["state"] == "done"
    assert moved_back.returncode == 0 or done_meanwhile, moved_back.stderr
    wait_for(lambda: assignment(master, assignment_id)["state"] == "done", timeout=120, what="the assignment")
    record = assignment(master, assignment_id)
    assert record["units"][unit["index"]]["moves"] >= 1
    assert all(u["state"] == "done" for u in record["units"])
    assert result_sha256(master, assignment_id, tmp_path) == reference_sha256("raytrace", RAYTRACE)


def test_a_move_to_a_node_that_refuses_leaves_the_unit_running_where_it_was(trio_cluster):
    master, (alpha, beta) = trio_cluster
    beta.call("pause")  # a paused node takes no guests: it refuses the negotiation
    reply = master.call("submit", plugin="raytrace", params=RAYTRACE)
    running = wait_for(lambda: running_units(master, reply["id"]), timeout=30, what="a unit running")
    unit = running[0]
    refused = master.cli("move", unit["task_id"], "beta", check=False)
    assert refused.returncode != 0
    assert "not taking guests" in refused.stderr
    after = next(u for u in assignment(master, reply["id"])["units"] if u["task_id"] == unit["task_id"])
    assert after["host"] == unit["host"] and after["state"] in ("running", "done")
    assert not beta.call("status")["guests"]


def test_evict_on_a_host_sends_its_guest_to_another_peer_and_frees_the_cpu(trio_cluster, tmp_path):
    master, (alpha, beta) = trio_cluster
    master.call("pause")  # the master keeps out of it: the units run on alpha and beta
    reply = master.call("submit", plugin="raytrace", params=RAYTRACE)
    assignment_id = reply["id"]
    wait_for(lambda: len(running_units(master, assignment_id)) == 2, timeout=30, what="both units running")
    master.call("resume")
    on_alpha = [g["task_id"] for g in alpha.call("status")["guests"]]
    assert on_alpha
    alpha.call("evict")
    assert not alpha.call("status")["guests"]
    # The evicted unit runs on the master now (beta's CPU is taken, alpha holds no guests for a while).
    wait_for(lambda: any(u["task_id"] == on_alpha[0] and u["host"] == master.node_id
                         for u in running_units(master, assignment_id))
             or assignment(master, assignment_id)["units"][int(on_alpha[0].rsplit(".", 1)[1])]["state"] == "done",
             timeout=20, what="the evicted unit to run on the master")
    wait_for(lambda: assignment(master, assignment_id)["state"] == "done", timeout=120, what="the assignment")
    assert result_sha256(master, assignment_id, tmp_path) == reference_sha256("raytrace", RAYTRACE)


def test_a_unit_held_on_a_paused_desk_says_so_at_its_master_and_leaves_it_when_the_submitter_moves_it(trio_cluster,
                                                                                                       tmp_path):
    # About one host owner's pause; the owner policy is out of the way on every node (trio_cluster's OWNER_AWAY).
    master, (alpha, beta) = trio_cluster
    master.call("pause")  # the units run on alpha and beta
    assignment_id = master.call("submit", plugin="raytrace", params=RAYTRACE)["id"]
    wait_for(lambda: len(running_units(master, assignment_id)) == 2, timeout=30, what="both units running")
    held = alpha.call("status")["guests"][0]["task_id"]
    alpha.call("pause")
    master.call("resume")

    def unit() -> dict:
        return next(u for u in assignment(master, assignment_id)["units"] if u["task_id"] == held)

    wait_for(lambda: unit()["reported"] == "paused", timeout=15, what="the master to see the unit paused")
    # alpha's pause sends its guests on after owner.pause_evict_after (10 min), and alpha's report says when.
    assert re.fullmatch(r"alpha's owner paused its guests: it goes on when they resume, or on another peer at "
                        r"\d\d:\d\d (tomorrow )?\(or move it there now\)", unit()["waiting"]), unit()["waiting"]
    master.cli("move", held, "master")
    wait_for(lambda: unit()["host"] == master.node_id, timeout=15, what="the held unit on the master")
    assert not alpha.call("status")["guests"]   # the paused desk keeps nothing of it
    wait_for(lambda: assignment(master, assignment_id)["state"] == "done", timeout=120, what="the assignment")
    assert result_sha256(master, assignment_id, tmp_path) == reference_sha256("raytrace", RAYTRACE)


def test_a_long_pause_sends_its_stopped_guest_on_and_the_unit_finishes_elsewhere_with_the_reference_result(
        nodes, tmp_path):
    # About a host owner's pause that outlasts `owner.pause_evict_after` (600 s on the defaults, 5 s here so that
    # the test need not wait ten minutes); the owner policy is out of the way on both nodes (OWNER_AWAY).
    config = CLUSTER_CONFIG + OWNER_AWAY + "pause_evict_after = 5\n"
    master = nodes("master", extra_config=config)
    alpha = nodes("alpha", seeds=(master.address,), extra_config=config)
    wait_for_members([master, alpha])
    master.call("pause")  # the unit starts on alpha
    one_unit = {**RAYTRACE, "rows_per_unit": 32}   # one unit of a few seconds: it is paused while it runs
    assignment_id = master.call("submit", plugin="raytrace", params=one_unit, verify=0.0)["id"]
    task_id = f"{assignment_id}.0"

    def progress_on(node) -> float:
        """The guest's progress as `node` reports it once it runs there (0 before: its state is not loaded yet)."""
        return next((g["progress"] for g in node.call("status")["guests"]
                     if g["task_id"] == task_id and g["state"] == "running"), 0.0)

    wait_for(lambda: progress_on(alpha) > 0.05, timeout=60, what=f"{task_id} under way on alpha")
    master.call("resume")
    alpha.cli("pause")
    stopped_at = max(progress_on(alpha), 0.05)
    reason = alpha.call("status")["hosting"]["reason"]
    assert re.fullmatch(r"paused by the owner; its guest leaves for other peers at \d\d:\d\d", reason), reason
    wait_for(lambda: not alpha.call("status")["guests"], timeout=60, what="the paused desk to send its guest on")
    # Hosting stays paused once the eviction is over: only the guest left.
    wait_for(lambda: alpha.call("status")["state"] == "paused", timeout=30, what="alpha paused again after the eviction")
    said = [e["message"] for e in alpha.call("events") if e["kind"] == "pause"]
    assert any(re.match(r"paused for \d+ s: the guests checkpoint and leave", message) for message in said), said
    # It goes on from the state it was paused in, not from the start.
    assert wait_for(lambda: progress_on(master), timeout=60, what=f"{task_id} running on the master") >= stopped_at
    wait_for(lambda: assignment(master, assignment_id)["state"] == "done", timeout=120, what="the assignment")
    (unit,) = assignment(master, assignment_id)["units"]
    assert unit["host"] == master.node_id and unit["moves"] >= 1, unit
    assert result_sha256(master, assignment_id, tmp_path) == reference_sha256("raytrace", one_unit)


PRIVATE_PLUGIN = '''
from frost_core import Done, Output, Param, Plugin, WorkUnit


class SquareSum(Plugin):
    """Only the master has this file: the hosts fetch it by hash."""

    name = "square-sum"
    version = "1.0"
    params = (Param("n", int, 300_000, "sum the squares below n", minimum=1),
              Param("units", int, 3, "work units", minimum=1))

    def split(self, params):
        n, count = params["n"], params["units"]
        bounds = [n * i // count for i in range(count + 1)]
        return [WorkUnit(index=i, data={"begin": bounds[i], "end": bounds[i + 1]}, memory_bytes=8 << 20, cost=1.0)
                for i in range(count)]

    def start(self, unit):
        return {"next": unit.data["begin"], "end": unit.data["end"], "total": 0}

    def step(self, state):
        stop = min(state["end"], state["next"] + 1000)
        total = state["total"] + sum(i * i for i in range(state["next"], stop))
        return Done(total) if stop == state["end"] else {**state, "next": stop, "total": total}

    def progress(self, state):
        return 0.5

    def combine(self, params, results):
        return Output(str(sum(results)).encode(), "text/plain", "sum.txt")


plugin = SquareSum()
'''


def test_hosts_fetch_a_plugin_only_the_master_has_by_its_hash(trio_cluster, tmp_path):
    master, hosts = trio_cluster
    source = tmp_path / "square_sum.py"
    source.write_text(PRIVATE_PLUGIN)
    master.cli("plugins", "add", str(source))
    master.call("pause")  # every unit must run on a host that lacks the plugin
    reply = master.call("submit", plugin="square-sum", params={"n": 300_000, "units": 2})
    wait_for(lambda: assignment(master, reply["id"])["state"] == "done", timeout=60, what="the assignment")
    output = tmp_path / "sum.txt"
    master.call("result", assignment=reply["id"], output=str(output))
    assert output.read_text() == str(sum(i * i for i in range(300_000)))
    master_hash = next(p["hash"] for p in master.call("plugins") if p["name"] == "square-sum")
    fetched = [p for host in hosts for p in host.call("plugins") if p["name"] == "square-sum"]
    assert fetched and all(p["source"] == "cluster" and p["hash"] == master_hash and p["ok"] for p in fetched)


def test_with_the_balancer_on_every_node_explains_its_last_round_and_the_image_stays_identical(nodes, tmp_path):
    config = CLUSTER_CONFIG.replace("balance_interval = 0", "balance_interval = 0.5")
    master = nodes("master", extra_config=config + OWNER_AWAY)
    hosts = [nodes(name, seeds=(master.address,), extra_config=config + OWNER_AWAY) for name in ("alpha", "beta")]
    wait_for_members([master, *hosts])
    reply = master.call("submit", plugin="raytrace", params=RAYTRACE)
    wait_for(lambda: assignment(master, reply["id"])["state"] == "done", timeout=120, what="the assignment")
    for node in (master, *hosts):
        why = wait_for(lambda node=node: node.call("status")["hosting"]["balance"], timeout=10,
                       what="the balancer's explanation")
        assert why.strip()
    assert result_sha256(master, reply["id"], tmp_path) == reference_sha256("raytrace", RAYTRACE)


def test_a_unit_evicted_into_its_master_brings_its_checkpoint_there_once(nodes, tmp_path):
    master = nodes("master", extra_config=CLUSTER_CONFIG + OWNER_AWAY)
    host = nodes("host", seeds=(master.address,), extra_config=CLUSTER_CONFIG + OWNER_AWAY)
    wait_for_members([master, host])
    master.call("pause")  # the unit starts on the host
    # Not about verification: a unit drawn for a check (cluster.verify, 2 %) would wait for a second host,
    # and the only other one keeps an evicted unit away for evict_hold (5 min).
    reply = master.call("submit", plugin="raytrace", params={**RAYTRACE, "rows_per_unit": 32}, verify=0.0)
    (unit,) = wait_for(lambda: running_units(master, reply["id"]), timeout=30, what="the unit running")
    assert unit["host"] == host.node_id
    wait_for(lambda: list((master.data_dir / "replicas" / unit["task_id"]).glob("*.ckpt")), timeout=20,
             what="a periodic replica at the master")
    master.call("resume")
    replicas_before = _replica_seqs(master, unit["task_id"])
    host.call("evict")
    moved = wait_for(lambda: next((m for e in host.call("events") if (m := _MOVED.search(e["message"]))), None),
                     timeout=20, what="the unit to move into its master")
    # The checkpoint it moved with reached the master once, as the move: not also as a replica.
    # (A guest too starved to answer in time moves with its last periodic checkpoint instead,
    # which was a replica before the eviction.)
    assert int(moved.group(1)) not in _replica_seqs(master, unit["task_id"]) - replicas_before
    # The owner reads peers by name, with the start of the id the logs use.
    assert f"moved to master ({master.node_id[:8]}) with checkpoint" in moved.group(0)
    assert any(e["message"].startswith(f"{unit['task_id']} placed on host ({host.node_id[:8]})")
               for e in master.call("events"))
    wait_for(lambda: assignment(master, reply["id"])["state"] == "done", timeout=120, what="the assignment")
    assert result_sha256(master, reply["id"], tmp_path) == reference_sha256(
        "raytrace", {**RAYTRACE, "rows_per_unit": 32})


_MOVED = re.compile(r"moved to .+? with checkpoint (\d+) ")


def _replica_seqs(master, task_id: str) -> set[int]:
    """The seqs of the replicas that read whole (a slot the master is writing over does not)."""
    seqs = set()
    for path in (master.data_dir / "replicas" / task_id).glob("*.ckpt"):
        with contextlib.suppress(CheckpointError, OSError):
            seqs.add(read_record(path).seq)
    return seqs
