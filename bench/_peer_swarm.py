"""Real peers for the UI benchmarks: N membership services with real transports on loopback, in one process.

Run as `python bench/_peer_swarm.py KEY_FILE SEED_HOST:PORT N`: each peer binds its own UDP and
TCP port on 127.0.0.1, joins through the seed with the cluster key, answers probes and gossips
its figures, which drift every 5-15 s as a desk's do (most moves below the 5 % push threshold).
They host nothing, so they advertise no free memory: no placement or move picks them (a unit
offered to them would find no one to take it). The peers probe once a second rather than four times
(the node they feed keeps the defaults): the swarm shares a 2-core machine with what it
measures. Prints "ready" once every peer serves; exits when its parent does.
"""

from __future__ import annotations

import logging
import os
import random
import sys
import uuid
from pathlib import Path

import trio

from frost_core.membership import Membership, MembershipConfig, ResourceFigures
from frost_core.wire.security import ClusterKey
from frost_core.wire.transport import open_transport

PEER_CONFIG = MembershipConfig(probe_interval=1.0, probe_timeout=0.5)


async def run_peer(index: int, key: ClusterKey, seed: tuple[str, int], rng: random.Random,
                   task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    node_id = uuid.uuid4().hex
    available = rng.uniform(0.2, 1.0)
    figures = ResourceFigures(available=available, cpus=4, free_memory=0, guests=rng.randrange(3))
    async with open_transport(host="127.0.0.1", port=0, key=key, node_id=node_id) as transport:
        membership = Membership(node_id=node_id, name=f"peer-{index:03d}", address=transport.local_address,
                                rng=random.Random(rng.getrandbits(64)), config=PEER_CONFIG, seeds=[seed],
                                figures=figures)
        async with trio.open_nursery() as nursery:
            await nursery.start(membership.serve, transport)
            task_status.started()
            while True:
                await trio.sleep(rng.uniform(5, 15))
                available = min(1.0, max(0.05, available * rng.uniform(0.9, 1.1)))
                membership.set_local_figures(ResourceFigures(available=available, cpus=4, free_memory=0,
                                                             guests=figures.guests))


async def main(key_file: str, seed: str, count: int) -> None:
    # The node's other calls to its peers (ledger swaps, say) are refused here as they should be:
    # not worth a warning on the benchmark's terminal.
    logging.getLogger("frost").setLevel(logging.ERROR)
    key = ClusterKey.load(Path(key_file))
    host, port = seed.rsplit(":", 1)
    rng = random.Random(7)
    parent = os.getppid()
    async with trio.open_nursery() as nursery:
        for index in range(count):
            await nursery.start(run_peer, index, key, (host, int(port)), random.Random(rng.getrandbits(64)))
        print("ready", flush=True)
        while os.getppid() == parent:
            await trio.sleep(1.0)
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
