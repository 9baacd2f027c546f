"""An attached UI's receiving side, for the benchmarks: run as `python bench/_watcher.py SOCKET`.

It attaches to a node's control socket as `frost-tui` does (`AttachedNode`, watch only), takes every snapshot the
node pushes as the UI takes it (received, decoded and checked against its types), draws nothing, and when its
standard input ends prints one JSON line: for each push, the wall time it came and this process's CPU seconds then
(the benchmark takes the pushes within its run: Python's start-up and imports are not in them).
"""

from __future__ import annotations

import json
import sys
import time

import trio

from frost_core import AttachedNode, local_target


async def watch(socket: str) -> dict:
    attached = AttachedNode([local_target(socket)], watch=True)
    pushes: list[tuple[float, float]] = []
    attached.set_snapshot_listener(lambda snapshot: pushes.append((time.time(), time.process_time())))
    async with trio.open_nursery() as nursery:
        await nursery.start(attached.serve)
        await trio.to_thread.run_sync(sys.stdin.read)
        nursery.cancel_scope.cancel()
    return {"pushes": pushes}


if __name__ == "__main__":
    print(json.dumps(trio.run(watch, sys.argv[1])), flush=True)
