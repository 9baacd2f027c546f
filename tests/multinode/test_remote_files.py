"""Remote file access across moves: master -> remote, remote -> remote, remote -> master, with files intact.

(master -> master is tests/process/test_files.py.) One unit reads an input file that only its
master has and writes an output file; it starts on a host, moves to a second host, whose first
host is then stopped (no residual dependency on it), and moves home to the master. The output
file and the result must be exactly those of a local run.
"""

from __future__ import annotations

import hashlib

import pytest

from frost_core.plugin.api import run_locally
from frost_core.plugin.loader import load_plugin_file
from tests.multinode.cluster import CLUSTER_CONFIG, assignment, running_units, wait_for_members
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(240)

SLOW_UPPER = '''
from frost_core import Done, Output, Param, Plugin, WorkUnit, open_input, output_path


class SlowUpper(Plugin):
    """Copies its input upper-cased, 4 KiB a step, with busy work that slows it down but changes nothing."""

    name = "slow-upper"
    version = "1.0"
    params = (Param("spin", int, 0, "busy work per step", minimum=0),)

    def split(self, params):
        return [WorkUnit(index=0, data={"spin": params["spin"]}, memory_bytes=8 << 20, cost=1.0)]

    def start(self, unit):
        with open_input("text") as reader:
            size = reader.seek(0, 2)
        return {"position": 0, "size": size, "spin": unit.data["spin"], "lines": 0}

    def step(self, state):
        with open_input("text") as reader:
            reader.seek(state["position"])
            chunk = reader.read(4096)
        if not chunk:
            return Done({"bytes": state["position"], "lines": state["lines"]})
        sum(range(state["spin"]))
        with open(output_path("upper.txt"), "ab") as writer:
            writer.write(chunk.upper())
        return {**state, "position": state["position"] + len(chunk), "lines": state["lines"] + chunk.count(b"\\n")}

    def progress(self, state):
        return state["position"] / state["size"] if state["size"] else 1.0

    def combine(self, params, results):
        return Output(repr(results[0]).encode(), "text/plain", "summary.txt")


plugin = SlowUpper()
'''


SPIN = 1_200_000


# Not about the owner: these nodes share one machine with other work (and with each other), which
# the default `share` policy would rightly take for a busy owner and keep the guests from; the
# owner policy's own tests are tests/process/test_owner.py, on the defaults.
OWNER_AWAY = '\n[owner]\npolicy = "always"\nmemory_pressure = 100\n'


def unit_on(master, assignment_id: str) -> dict:
    return assignment(master, assignment_id)["units"][0]


def move_and_wait(master, task_id: str, destination, assignment_id: str) -> None:
    """Move the unit and wait until it steps at its new host (each step opens the input there)."""
    master.cli("move", task_id, destination.data_dir.name)
    wait_for(lambda: unit_on(master, assignment_id)["host"] == destination.node_id, timeout=20,
             what=f"the master to learn that {destination.data_dir.name} runs the unit")
    arrived = wait_for(lambda: [g["progress"] for g in destination.call("status")["guests"] if g["task_id"] == task_id],
                       timeout=20, what="the guest at its new host")
    # "running", not just more progress: a resumed guest reports its state's progress before its first
    # step (state "starting"), which can be ahead of what was seen as it arrived (0 before that report).
    wait_for(lambda: [g["progress"] for g in destination.call("status")["guests"]
                      if g["task_id"] == task_id and g["state"] == "running" and g["progress"] > arrived[0]],
             timeout=30, what=f"the unit to make progress on {destination.data_dir.name}")


def test_a_moving_unit_keeps_its_input_and_output_files(nodes, tmp_path):
    master = nodes("master", extra_config=CLUSTER_CONFIG + OWNER_AWAY)
    hosts = [nodes(name, seeds=(master.address,), extra_config=CLUSTER_CONFIG + OWNER_AWAY)
             for name in ("alpha", "beta")]
    wait_for_members([master, *hosts])
    plugin_file = tmp_path / "slow_upper.py"
    plugin_file.write_text(SLOW_UPPER)
    master.cli("plugins", "add", str(plugin_file))
    text = tmp_path / "text.txt"
    text.write_bytes(b"".join(b"line %d of the input, only on the master\n" % i for i in range(40_000)))
    sha256 = hashlib.sha256(text.read_bytes()).hexdigest()
    reference_dir = tmp_path / "reference"
    reference = run_locally(load_plugin_file(plugin_file), {}, inputs={"text": text}, output_dir=reference_dir)
    slow = f"--param=spin={SPIN}"  # the same result, about 12 s of steps: time for three moves

    master.call("pause")  # master -> remote: the unit must start on a host
    assignment_id = master.cli("submit", "slow-upper", slow, "--input", f"text={text}").stdout.split()[1].rstrip(":")
    [unit] = wait_for(lambda: running_units(master, assignment_id), timeout=30, what="the unit running on a host")
    first = next(h for h in hosts if h.node_id == unit["host"])
    second = next(h for h in hosts if h is not first)
    wait_for(lambda: (first.data_dir / "file-cache" / sha256).exists(), timeout=30,
             what="the first host to fetch the input from the master")

    move_and_wait(master, unit["task_id"], second, assignment_id)  # remote -> remote
    assert (second.data_dir / "file-cache" / sha256).exists()
    first.stop()  # the input comes from the master, never from the host the unit left

    master.call("resume")
    move_and_wait(master, unit["task_id"], master, assignment_id)  # remote -> master
    # The folder may exist (guests are granted it before they start); no copy may be in it.
    assert not any((master.data_dir / "file-cache").glob("*")), "the master reads its own stored copy"

    wait_for(lambda: assignment(master, assignment_id)["state"] == "done", timeout=120, what="the assignment")
    record = unit_on(master, assignment_id)
    assert record["moves"] >= 2
    summary = tmp_path / "summary.txt"
    master.cli("result", assignment_id, "--output", str(summary), "--files", str(tmp_path / "files"))
    assert summary.read_bytes() == reference.data
    assert (tmp_path / "files" / "upper.txt").read_bytes() == (reference_dir / "upper.txt").read_bytes()
    assert (master.data_dir / "results" / assignment_id / "upper.txt").read_bytes() == text.read_bytes().upper()
