"""Monte Carlo estimate of pi, the embarrassingly parallel (EP) benchmark.

Sample i is drawn from a counter-based generator: the SplitMix64 output for counter i of the
seed's stream, split into two 32-bit coordinates. The test x*x + y*y < 2**64 is integer
arithmetic, so the hit count depends only on the seed and the sample count: not on how the
samples were cut into units, nor where or how often those units ran.
"""

from __future__ import annotations

import json
import math

from frost_core import Done, Output, Param, Plugin, PluginError, WorkUnit

MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
CHUNK = 20_000  # samples per step: tens of milliseconds
RADIUS2 = 1 << 64  # the quarter circle of radius 2**32


class MonteCarloPi(Plugin):
    name = "montecarlo-pi"
    version = "1.0"
    description = "Estimates pi by sampling points in the unit square (seeded, reproducible)."
    params = (
        Param("samples", int, 10_000_000, "points to sample in total", minimum=1, maximum=10**12),
        Param("units", int, 16, "work units to spread the samples over", minimum=1, maximum=100_000),
        Param("seed", int, 20240521, "stream of random numbers to use", minimum=0, maximum=MASK),
    )

    def split(self, params: dict) -> list[WorkUnit]:
        total, seed = params["samples"], params["seed"]
        count = min(params["units"], total)
        bounds = [total * i // count for i in range(count + 1)]
        return [
            WorkUnit(
                index=i,
                data={"seed": seed, "begin": bounds[i], "end": bounds[i + 1]},
                memory_bytes=16 * 1024 * 1024,
                cost=float(bounds[i + 1] - bounds[i]),
            )
            for i in range(count)
        ]

    def start(self, unit: WorkUnit) -> dict:
        data = unit.data
        return {"key": mix(data["seed"]), "begin": data["begin"], "next": data["begin"], "end": data["end"], "hits": 0}

    def step(self, state: dict) -> dict | Done:
        stop = min(state["end"], state["next"] + CHUNK)
        hits = state["hits"] + count_hits(state["key"], state["next"], stop)
        if stop == state["end"]:
            return Done({"hits": hits, "samples": state["end"] - state["begin"]})
        return {**state, "next": stop, "hits": hits}

    def progress(self, state: dict) -> float:
        span = state["end"] - state["begin"]
        return (state["next"] - state["begin"]) / span if span else 1.0

    def combine(self, params: dict, results: list) -> Output:
        hits = samples = 0
        for index, result in enumerate(results):
            if not isinstance(result, dict) or not isinstance(result.get("hits"), int) or not isinstance(result.get("samples"), int):
                raise PluginError(f"result of unit {index} is not a hit count")
            hits += result["hits"]
            samples += result["samples"]
        if samples != params["samples"]:
            raise PluginError(f"the results cover {samples} of {params['samples']} samples")
        quarter = hits / samples
        report = {
            "pi": 4.0 * quarter,
            "standard_error": 4.0 * math.sqrt(quarter * (1.0 - quarter) / samples),
            "hits": hits,
            "samples": samples,
            "seed": params["seed"],
        }
        return Output((json.dumps(report, indent=2, sort_keys=True) + "\n").encode(), "application/json", "pi.json")


def mix(z: int) -> int:
    """The SplitMix64 finaliser: a bijection on 64-bit integers that scrambles every bit."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def count_hits(key: int, begin: int, end: int) -> int:
    """How many samples begin..end-1 of stream `key` fall inside the quarter circle."""
    hits = 0
    for i in range(begin, end):
        z = (key + (i + 1) * GAMMA) & MASK
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z ^= z >> 31
        x, y = z >> 32, z & 0xFFFFFFFF
        if x * x + y * y < RADIUS2:
            hits += 1
    return hits


plugin = MonteCarloPi()
