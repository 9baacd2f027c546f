"""A bench gang plugin: every member carries N incompressible bytes of state and passes a token each superstep.

The gang checkpoint benchmark needs members whose global checkpoint has an exact size, whatever
the plate. The ballast is drawn from a generator seeded by the rank, so it does not compress and
the result (each member's digest of it) is the same however often the gang was checkpointed and
moved. A superstep does `step_ms` of simulated work and sends one small message to the next rank. The
work is timed slices (`work`, as `ballast.py`'s units do) rather than CPU burnt: several simulated
hosts share one 2-core machine with other jobs, and this gives each its own virtual CPU, which an
owner's pause (the member's guest frozen) still stops, so the owner's load is the schedule's, not
the machine's.
"""

from __future__ import annotations

import hashlib
import random
import time

from frost_core import MAX_MEMBERS, GangPlugin, Output, Param, Superstep


class GangBallast(GangPlugin):
    name = "gang_ballast"
    version = "1.0"
    description = "Members carry incompressible ballast in their state and pass a token (gang checkpoint benchmark)."
    params = (
        Param("members", int, 2, "members of the gang", minimum=1, maximum=MAX_MEMBERS),
        Param("ballast_bytes", int, 1 << 20, "bytes of incompressible ballast in each member's state", minimum=0,
              maximum=1 << 27),
        Param("supersteps", int, 100, "supersteps until done", minimum=1, maximum=10**7),
        Param("step_ms", int, 20, "milliseconds each superstep waits", minimum=0, maximum=10_000),
    )

    def members(self, params: dict) -> int:
        return params["members"]

    def start(self, params: dict, rank: int, size: int) -> dict:
        return {"ballast": random.Random(rank).randbytes(params["ballast_bytes"]), "superstep": 0, "tokens": 0,
                "supersteps": params["supersteps"], "step_ms": params["step_ms"]}

    def step(self, state: dict, rank: int, size: int, inbox: dict) -> Superstep:
        tokens = state["tokens"] + sum(len(messages) for messages in inbox.values())
        if state["superstep"] == state["supersteps"]:
            return Superstep({**state, "tokens": tokens}, done=True)
        work(state["step_ms"] / 1000)   # it changes nothing in the state
        outbox = {(rank + 1) % size: [state["superstep"]]} if size > 1 else {}
        return Superstep({**state, "superstep": state["superstep"] + 1, "tokens": tokens}, outbox)

    def finish(self, state: dict, rank: int, size: int) -> dict:
        return {"digest": hashlib.sha256(state["ballast"]).hexdigest(), "tokens": state["tokens"]}

    def combine(self, params: dict, results: list) -> Output:
        lines = "".join(f"{rank} {r['digest']} {r['tokens']}\n" for rank, r in enumerate(results))
        return Output(lines.encode(), "text/plain", "gang-ballast.txt")


def work(seconds: float) -> None:
    """Simulated work: 1 ms sleeps, each counting at most 30 ms, so a guest frozen for longer (its owner's
    pause) does no work meanwhile, and a guest at SCHED_IDLE woken late on a loaded machine loses little."""
    remaining, last = seconds, time.monotonic()
    while remaining > 0:
        time.sleep(min(0.001, remaining))
        now = time.monotonic()
        remaining -= min(now - last, 0.03)
        last = now


plugin = GangBallast()
