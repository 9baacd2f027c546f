"""Checkpoint overhead at the default interval, as a share of the task's own time.

Question: what fraction of a guest's time goes into checkpoints when they come at the default
Young interval (C measured here, 2 owner interruptions per hour, bounds 30..900 s)? Goal:
<= 0.5 %. Measured in the same run: the same unit with checkpoints off (baseline) and with a
checkpoint every 0.25 s. The guest keeps computing while the node hashes and writes, so what it
loses per checkpoint is its encode time (reported by the guest; the CPU-time difference of the
two runs per checkpoint is shown as a cross-check, noisy on a shared machine). C is the node's
request-to-durable time. Overhead = encode time / T_default; C / T_default is the upper bound.
"""

from __future__ import annotations

import os
import re
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402

from frost_core.policies.checkpoint_interval import young_interval  # noqa: E402
from frost_core.guest import Completed, GuestEvent, GuestSettings, GuestSupervisor, GuestTask  # noqa: E402
from frost_core.plugin.api import WorkUnit  # noqa: E402
from frost_core.plugin.registry import content_hash  # noqa: E402

STEPS = int(os.environ.get("OVERHEAD_STEPS", "600"))
STATE_MB = (1, 16)
DEFAULTS = GuestSettings()
WORKER = textwrap.dedent(
    """
    import time
    from frost_core import Done, Output, Plugin, WorkUnit

    class Worker(Plugin):
        name = "worker"
        version = "1"
        def split(self, params):
            return []
        def start(self, unit):
            size = unit.data["bytes"]
            return {"i": 0, "n": unit.data["steps"], "blob": bytes(range(256)) * (size // 256), "acc": 0}
        def step(self, state):
            if state["i"] >= state["n"]:
                return Done({"cpu": time.process_time(), "acc": state["acc"]})
            acc = state["acc"]
            for k in range(20000):
                acc = (acc * 31 + k) % 1000003
            return {**state, "i": state["i"] + 1, "acc": acc}
        def progress(self, state):
            return state["i"] / state["n"]
        def combine(self, params, results):
            return Output(b"", "text/plain", "x.txt")

    plugin = Worker()
    """
)
COST = re.compile(r"in (\d+) ms \(encode (\d+) ms\)")


async def run_once(
    tmp: Path, plugin: Path, size: int, interval: float, seq: int
) -> tuple[float, list[float], list[float]]:
    events: list[GuestEvent] = []
    settings = GuestSettings(min_checkpoint_interval=interval, max_checkpoint_interval=interval,
                             step_timeout=3600, max_state_bytes=64 << 20)
    guests = GuestSupervisor(data_dir=tmp / f"node{seq}", settings=settings, on_event=events.append)
    task = GuestTask(task_id=f"bench0001-{seq}.0", assignment_id=f"bench0001-{seq}", origin="bench0001",
                     plugin_name="worker", plugin_version="1", plugin_hash=content_hash(plugin),
                     plugin_path=str(plugin), epoch=1,
                     unit=WorkUnit(0, {"bytes": size, "steps": STEPS}, 4 * size + (8 << 20), 1.0))
    outcome = await guests.run(task)
    assert isinstance(outcome, Completed), outcome
    found = [m for e in events if e.kind == "checkpoint" and (m := COST.search(e.message))]
    return outcome.value()["cpu"], [int(m.group(1)) / 1000 for m in found], [int(m.group(2)) / 1000 for m in found]


async def measure(tmp: Path) -> dict:
    plugin = tmp / "worker.py"
    plugin.write_text(WORKER)
    figures, seq = {}, 0
    for mb in STATE_MB:
        size = mb << 20
        seq += 2
        cpu_off, _, _ = await run_once(tmp, plugin, size, 1e6, seq)
        cpu_on, costs, encodes = await run_once(tmp, plugin, size, 0.25, seq + 1)
        cpu_difference = max(cpu_on - cpu_off, 0.0) / max(len(costs), 1)
        latency = statistics.median(costs) if costs else 0.0
        per_checkpoint = statistics.median(encodes) if encodes else 0.0
        interval = young_interval(latency, DEFAULTS.interruptions_per_hour,
                                  lower=DEFAULTS.min_checkpoint_interval, upper=DEFAULTS.max_checkpoint_interval)
        figures[f"{mb}MB"] = {
            "checkpoints": len(costs), "guest_cpu_off": cpu_off, "guest_cpu_on": cpu_on,
            "guest_encode_per_checkpoint": per_checkpoint, "cpu_difference_per_checkpoint": cpu_difference,
            "checkpoint_latency_C": latency,
            "default_interval_T": interval, "overhead_encode_over_T": per_checkpoint / interval,
            "overhead_C_over_T": latency / interval,
        }
    return figures


def main() -> None:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        figures = trio.run(measure, Path(tmp))
    rows = [
        [name, f["checkpoints"], f["guest_encode_per_checkpoint"] * 1000, f["cpu_difference_per_checkpoint"] * 1000,
         f["checkpoint_latency_C"] * 1000, f["default_interval_T"], f"{f['overhead_encode_over_T']:.3%}",
         f"{f['overhead_C_over_T']:.3%}",
         "yes" if f["overhead_encode_over_T"] <= 0.005 else "NO"]
        for name, f in figures.items()
    ]
    print_table(["state", "checkpoints", "encode ms", "CPU diff ms", "C ms", "default T s", "overhead (encode/T)",
                 "overhead (C/T)", "<= 0.5 %"], rows)
    write_results("checkpoint_overhead", figures)


if __name__ == "__main__":
    main()
