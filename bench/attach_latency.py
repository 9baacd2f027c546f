"""Command sent -> new snapshot on an attached UI, against a fresh CLI request for the same command.

One real `frost-tui --headless` node. Attached: an `AttachedNode` (what the UI holds) sends
PauseHosting / ResumeHosting alternately over its open attach connection and the clock stops
when a pushed snapshot shows the new state. CLI, in-process: `call_node` opens the control
socket, sends the same command and waits for the reply (the node answers once it is done), then
asks for the status; no Python start-up. CLI, process: `frost-tui pause` / `frost-tui resume`
as a script runs them, start-up included.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import print_table, write_results  # noqa: E402
from bench._nodes import BENCH_CONFIG  # noqa: E402
from frost_core import (  # noqa: E402
    AttachedNode, ClusterKey, GetStatus, PauseHosting, ResumeHosting, call_node, local_target,
)
from tests.nodes import FROST_TUI, start_node  # noqa: E402

ROUNDS = 40
PROCESS_ROUNDS = 10


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


async def attached_rounds(socket_path: Path) -> list[float]:
    node = AttachedNode([local_target(socket_path)])
    timings = []
    async with trio.open_nursery() as nursery:
        await nursery.start(node.serve)
        while not node.link().connected:
            await trio.sleep(0.01)
        for n in range(ROUNDS):
            command, state = (PauseHosting(), "paused") if n % 2 == 0 else (ResumeHosting(), None)
            before = node.snapshot()
            start = time.perf_counter()
            node.send_nowait(command)
            while node.snapshot() is before or (node.snapshot().hosting.state == "paused") != (state == "paused"):
                await trio.sleep(0.0005)
            timings.append(time.perf_counter() - start)
            await trio.sleep(0.2)  # the next command does not ride on this push's rate limit
        nursery.cancel_scope.cancel()
    return timings


def cli_rounds(paths) -> list[float]:
    timings = []
    for n in range(ROUNDS):
        command, state = (PauseHosting(), "paused") if n % 2 == 0 else (ResumeHosting(), None)
        start = time.perf_counter()
        call_node(paths, command)
        status = call_node(paths, GetStatus())
        timings.append(time.perf_counter() - start)
        assert (status.state == "paused") == (state == "paused")
        time.sleep(0.2)
    return timings


def process_rounds(node) -> list[float]:
    timings = []
    for n in range(PROCESS_ROUNDS):
        verb = "pause" if n % 2 == 0 else "resume"
        start = time.perf_counter()
        subprocess.run([FROST_TUI, verb, "--data-dir", str(node.data_dir), "--config",
                        str(node.data_dir / "config.toml")], check=True, capture_output=True, timeout=60)
        timings.append(time.perf_counter() - start)
    return timings


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="frost-attach-bench-") as folder:
        key = Path(folder) / "cluster.key"
        ClusterKey.generate().save(key)
        node = start_node(Path(folder) / "desk", key_file=key, base_config=BENCH_CONFIG)
        try:
            results = {
                "attached: command -> pushed snapshot": trio.run(attached_rounds, node.paths.control_socket),
                "CLI in-process: command + status": cli_rounds(node.paths),
                "CLI process: frost-tui pause/resume": process_rounds(node),
            }
        finally:
            node.stop()
    rows, figures = [], {}
    for name, values in results.items():
        ms = [v * 1000 for v in values]
        figures[name] = {"n": len(ms), "median_ms": statistics.median(ms), "p95_ms": percentile(ms, 0.95),
                         "max_ms": max(ms)}
        rows.append([name, len(ms), statistics.median(ms), percentile(ms, 0.95), max(ms)])
    print_table(["path", "n", "median ms", "p95 ms", "max ms"], rows)
    write_results("attach_latency", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
