"""A bench plugin: a state of N incompressible bytes and short steps that announce where they run.

The migration benchmarks need a unit whose checkpoint has an exact size and whose arrival on a
machine can be timed from outside. The ballast is drawn from a seeded generator, so it does not
compress and the result is the same wherever the unit ran. A step "works" for `step_ms` of
simulated time (see `work`) rather than by burning CPU: several simulated desks share one 2-core
machine with other jobs, and this gives each its own virtual CPU, which a SIGSTOP still stops.
The first step in each guest process prints the wall-clock time and the step count it resumed
from: the node turns that line into a guest-log event on the machine where the unit now runs,
which is how a benchmark sees "running on the destination" without polling.
"""

from __future__ import annotations

import hashlib
import random
import time

from frost_core import Done, Output, Param, Plugin, WorkUnit

FIRST_STEP = "bench-first-step"
"""The marker of the line the first step in each guest process prints: `FIRST_STEP <unix time> <steps done>`."""
MIB = 1 << 20
SLICE_CREDIT = 0.003

_first_step_in_this_process = True


class Ballast(Plugin):
    name = "bench-ballast"
    version = "1.0"
    description = "Carries incompressible ballast in its state and steps in timed slices (migration benchmarks)."
    params = (
        Param("ballast_bytes", int, MIB, "bytes of incompressible ballast in each unit's state", minimum=0,
              maximum=1 << 30),
        Param("units", int, 1, "work units", minimum=1, maximum=64),
        Param("steps", int, 1000, "steps until a unit is done", minimum=1, maximum=10**9),
        Param("step_ms", int, 2, "milliseconds of simulated work per step", minimum=0, maximum=1000),
    )

    def split(self, params: dict) -> list[WorkUnit]:
        size = params["ballast_bytes"]
        return [
            WorkUnit(index=i, data={"ballast_bytes": size, "steps": params["steps"], "step_ms": params["step_ms"]},
                     # The child holds the state, its encoding and its envelope at a checkpoint.
                     memory_bytes=4 * size + 32 * MIB, cost=float(params["steps"] * params["step_ms"]))
            for i in range(params["units"])
        ]

    def start(self, unit: WorkUnit) -> dict:
        data = unit.data
        ballast = random.Random(unit.index).randbytes(data["ballast_bytes"])
        return {"ballast": ballast, "done": 0, "steps": data["steps"], "step_ms": data["step_ms"]}

    def step(self, state: dict) -> dict | Done:
        global _first_step_in_this_process
        if _first_step_in_this_process:
            _first_step_in_this_process = False
            print(f"{FIRST_STEP} {time.time():.6f} {state['done']}", flush=True)
        work(state["step_ms"] / 1000)
        done = state["done"] + 1
        if done >= state["steps"]:
            return Done({"steps": done, "ballast_sha256": hashlib.sha256(state["ballast"]).hexdigest()})
        return {**state, "done": done}

    def progress(self, state: dict) -> float:
        return state["done"] / state["steps"]

    def combine(self, params: dict, results: list) -> Output:
        lines = [f"{i} {r['steps']} {r['ballast_sha256']}" for i, r in enumerate(results)]
        return Output(("\n".join(lines) + "\n").encode(), "text/plain", "ballast.txt")


def work(seconds: float) -> None:
    """Simulated CPU work: sleep in 1 ms slices, counting at most SLICE_CREDIT seconds per slice.

    A late wake-up (a busy machine) still counts, up to the credit; a stop (SIGSTOP while the
    owner is busy) counts only the credit, so pausing the guest pauses its work.
    """
    remaining, last = seconds, time.monotonic()
    while remaining > 0:
        time.sleep(min(0.001, remaining))
        now = time.monotonic()
        remaining -= min(now - last, SLICE_CREDIT)
        last = now


plugin = Ballast()
