"""Gossip traffic per node at N = 100: the live membership service on the in-memory network, MockClock.

Every node changes its figures about every 10 s (a random walk; most moves are below FROST's
5 % push threshold). We count encoded message bodies and bytes on the wire as
frost_core.wire.transport would send them (membership/wire_cost.py): IPv4/UDP headers, sealing
and sender id per datagram; TCP/IP headers, frame headers, AEAD tags and acks per stream
message; and a SYN + HELLO handshake (plus teardown) whenever no pooled channel to the peer
is still open (pooled channels idle over 60 s are closed by the peer). Baseline, same run:
what the same exchanges would have cost had each sent the whole table both ways instead of
a digest and the differences.
"""

from __future__ import annotations

import random
import sys
import time

import trio
import trio.testing

from _common import print_table, write_results
from frost_core.membership import ResourceFigures
from frost_core.membership.messages import PushPull, PushPullReply, entry_from_record
from frost_core.membership.testing import open_sim_cluster
from frost_core.wire.messages import encode_message

N = 100
WARMUP = 70.0
"""Longer than the 60 s idle timeout, so pooled channels have started to expire: the steady state."""
MEASURE = 30.0
GOAL_KBIT = 50.0


async def measure() -> dict:
    async with open_sim_cluster(21, loss=0.01) as cluster:
        nodes = [await cluster.start_node() for _ in range(N)]
        rng = random.Random(5)

        async def drift(node) -> None:
            available = 1.0
            while True:
                await trio.sleep(rng.uniform(5, 15))
                available = max(0.05, available * rng.uniform(0.9, 1.1))
                node.membership.set_local_figures(ResourceFigures(available=available, cpus=4, free_memory=8 << 30))

        for node in nodes:
            cluster.nursery.start_soon(drift, node)
        await trio.sleep(WARMUP)
        by_message = dict(cluster.network.bytes_by_message)
        by_kind = dict(cluster.network.wire_by_kind)
        before = {
            a: (t.sent_bytes, t.sent_wire_bytes, t.exchanges_opened, t.connections_opened)
            for a, t in cluster.network.traffic.items()
        }
        await trio.sleep(MEASURE)
        sent = [t.sent_bytes - before[a][0] for a, t in cluster.network.traffic.items()]
        wire = [t.sent_wire_bytes - before[a][1] for a, t in cluster.network.traffic.items()]
        exchanges = sum(t.exchanges_opened - before[a][2] for a, t in cluster.network.traffic.items())
        connections = sum(t.connections_opened - before[a][3] for a, t in cluster.network.traffic.items())
        now = trio.current_time()
        table = nodes[0].membership.members()
        entries = tuple(entry_from_record(r, now) for r in table)
        full = len(encode_message(PushPull(sender=entries[0], digest=None, entries=entries)))
        full += len(encode_message(PushPullReply(entries=entries)))
        return {
            "kbit_per_node_by_message": {
                name: 8 * (size - by_message.get(name, 0)) / N / MEASURE / 1000
                for name, size in cluster.network.bytes_by_message.items()
            },
            "wire_kbit_per_node_by_kind": {
                kind: 8 * (size - by_kind.get(kind, 0)) / N / MEASURE / 1000
                for kind, size in cluster.network.wire_by_kind.items()
            },
            "table_size": len(table),
            "payload_kbit_per_node": 8 * sum(sent) / len(sent) / MEASURE / 1000,
            "payload_kbit_max_node": 8 * max(sent) / MEASURE / 1000,
            "wire_kbit_per_node": 8 * sum(wire) / len(wire) / MEASURE / 1000,
            "wire_kbit_max_node": 8 * max(wire) / MEASURE / 1000,
            "exchanges_per_node_per_s": exchanges / N / MEASURE,
            "share_of_exchanges_opening_a_connection": connections / exchanges,
            "full_table_exchange_bytes": full,
            "baseline_full_table_kbit_per_node": 8 * full * exchanges / N / MEASURE / 1000,
        }


def main() -> int:
    started = time.perf_counter()
    figures = {}

    async def run() -> None:
        figures.update(await measure())

    trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0))
    met = figures["wire_kbit_per_node"] <= GOAL_KBIT
    ratio = figures["baseline_full_table_kbit_per_node"] / figures["payload_kbit_per_node"]
    print(f"N = {N}, {MEASURE:.0f} simulated seconds after {WARMUP:.0f} s warm-up, 1 % loss, figures change every ~10 s\n")
    print_table(
        ["measure", "kbit/s per node (mean)", "max node", "goal", "met"],
        [
            ["payload (message bodies)", figures["payload_kbit_per_node"], figures["payload_kbit_max_node"], "", ""],
            ["on-wire estimate", figures["wire_kbit_per_node"], figures["wire_kbit_max_node"], f"<= {GOAL_KBIT}", "yes" if met else "NO"],
            ["baseline: whole tables", figures["baseline_full_table_kbit_per_node"], "", "", f"{ratio:.1f}x ours"],
        ],
    )
    print("\nbodies by message type, kbit/s per node:", {k: round(v, 2) for k, v in figures["kbit_per_node_by_message"].items()})
    print("on-wire bytes beyond bodies, kbit/s per node:", {k: round(v, 2) for k, v in figures["wire_kbit_per_node_by_kind"].items()})
    print(f"exchanges per node per s: {figures['exchanges_per_node_per_s']:.2f}, "
          f"{figures['share_of_exchanges_opening_a_connection']:.0%} of them open a connection")
    figures.update(goal_kbit=GOAL_KBIT, goal_met=met, baseline_ratio=ratio, seconds=time.perf_counter() - started)
    write_results("gossip_traffic", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
