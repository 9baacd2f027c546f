"""Gossip traffic per node at N = 100 and 1,000: the real membership service on the in-memory network, MockClock.

Every node changes its figures about every 10 s (a random walk; most moves are below FROST's
5 % push threshold). We count encoded message bodies and bytes on the wire as
frost_core.wire.transport would send them (membership/wire_cost.py): IPv4/UDP headers, sealing
and sender id per datagram; TCP/IP headers, frame headers, AEAD tags and acks per stream
message; and a SYN + HELLO handshake (plus teardown) whenever no pooled channel to the peer
is still open (pooled channels idle over 60 s are closed by the peer). Baseline, same run:
what the same exchanges would have cost had each sent the whole table both ways instead of
a digest of news and the differences.

N = 100 runs WARMUP then MEASURE simulated seconds; N = 1,000 starts formed (bench/_gossip.py)
and measures LARGE_MEASURE seconds after one round (kept short so that the code before
exchanges carried news, O(N²) wall time a round in the simulator, ran the same way), so its
pool of channels is still cold and the on-wire figure overstates connection set-ups, and few
nodes have changed their figures yet (the first change comes 5-15 s in): a quiet cluster.
Quick run: `--sizes 100`.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import trio
import trio.testing

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402
from _gossip import formed_cluster  # noqa: E402

from frost_core.membership import MembershipConfig, ResourceFigures  # noqa: E402
from frost_core.membership.messages import PushPull, PushPullReply, entry_from_record  # noqa: E402
from frost_core.membership.testing import open_sim_cluster  # noqa: E402
from frost_core.wire.messages import encode_message  # noqa: E402

SIZES = (100, 1000)
WARMUP = 70.0
"""Longer than the 60 s idle timeout, so pooled channels have started to expire: the steady state."""
MEASURE = 30.0
LARGE_MEASURE = 4.0
GOAL_KBIT = 50.0
"""At N = 100."""
ROUND = MembershipConfig().gossip_interval


async def measure(n: int) -> dict:
    if n <= 100:
        async with open_sim_cluster(21, loss=0.01) as cluster:
            nodes = [await cluster.start_node() for _ in range(n)]
            return await measure_cluster(cluster, nodes, WARMUP, MEASURE)
    async with formed_cluster(n, loss=0.01, seed=21) as cluster:
        return await measure_cluster(cluster, cluster.nodes, ROUND, LARGE_MEASURE)


async def measure_cluster(cluster, nodes, warmup: float, measured: float) -> dict:
    n = len(nodes)
    rng = random.Random(5)

    async def drift(node) -> None:
        available = 1.0
        while True:
            await trio.sleep(rng.uniform(5, 15))
            available = max(0.05, available * rng.uniform(0.9, 1.1))
            node.membership.set_local_figures(ResourceFigures(available=available, cpus=4, free_memory=8 << 30))

    for node in nodes:
        cluster.nursery.start_soon(drift, node)
    await trio.sleep(warmup)
    by_message = dict(cluster.network.bytes_by_message)
    by_kind = dict(cluster.network.wire_by_kind)
    before = {
        a: (t.sent_bytes, t.sent_wire_bytes, t.exchanges_opened, t.connections_opened, t.datagrams_sent)
        for a, t in cluster.network.traffic.items()
    }
    await trio.sleep(measured)
    sent = [t.sent_bytes - before[a][0] for a, t in cluster.network.traffic.items()]
    wire = [t.sent_wire_bytes - before[a][1] for a, t in cluster.network.traffic.items()]
    exchanges = sum(t.exchanges_opened - before[a][2] for a, t in cluster.network.traffic.items())
    connections = sum(t.connections_opened - before[a][3] for a, t in cluster.network.traffic.items())
    datagrams = sum(t.datagrams_sent - before[a][4] for a, t in cluster.network.traffic.items())
    rounds = measured / ROUND
    now = trio.current_time()
    table = nodes[0].membership.members()
    entries = tuple(entry_from_record(r, now) for r in table)
    full = len(encode_message(PushPull(sender=entries[0], digest=None, entries=entries)))
    full += len(encode_message(PushPullReply(entries=entries)))
    return {
        "n": n,
        "measured_seconds": measured,
        "payload_bytes_per_node_per_round": sum(sent) / n / rounds,
        "wire_bytes_per_node_per_round": sum(wire) / n / rounds,
        "messages_per_node_per_round": (datagrams + 2 * exchanges) / n / rounds,
        "datagrams_per_node_per_round": datagrams / n / rounds,
        "exchanges_per_node_per_round": exchanges / n / rounds,
        "kbit_per_node_by_message": {
            name: 8 * (size - by_message.get(name, 0)) / n / measured / 1000
            for name, size in cluster.network.bytes_by_message.items()
        },
        "wire_kbit_per_node_by_kind": {
            kind: 8 * (size - by_kind.get(kind, 0)) / n / measured / 1000
            for kind, size in cluster.network.wire_by_kind.items()
        },
        "table_size": len(table),
        "payload_kbit_per_node": 8 * sum(sent) / len(sent) / measured / 1000,
        "payload_kbit_max_node": 8 * max(sent) / measured / 1000,
        "wire_kbit_per_node": 8 * sum(wire) / len(wire) / measured / 1000,
        "wire_kbit_max_node": 8 * max(wire) / measured / 1000,
        "exchanges_per_node_per_s": exchanges / n / measured,
        "share_of_exchanges_opening_a_connection": connections / exchanges,
        "full_table_exchange_bytes": full,
        "baseline_full_table_kbit_per_node": 8 * full * exchanges / n / measured / 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="cluster sizes N (100 is the quick run)")
    args = parser.parse_args()
    started = time.perf_counter()
    cases = []
    for n in (int(s) for s in args.sizes.split(",")):
        figures: dict = {}

        async def run() -> None:
            figures.update(await measure(n))

        began = time.perf_counter()
        trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0))
        figures["wall_seconds"] = time.perf_counter() - began
        figures["baseline_ratio"] = figures["baseline_full_table_kbit_per_node"] / figures["payload_kbit_per_node"]
        cases.append(figures)
    rows = []
    for f in cases:
        goal = f"<= {GOAL_KBIT}" if f["n"] == 100 else "-"
        met = ("yes" if f["wire_kbit_per_node"] <= GOAL_KBIT else "NO") if f["n"] == 100 else "-"
        rows.append([f["n"], f["measured_seconds"], f["messages_per_node_per_round"], f["payload_bytes_per_node_per_round"],
                     f["wire_bytes_per_node_per_round"], f["payload_kbit_per_node"], f["wire_kbit_per_node"],
                     f["wire_kbit_max_node"], goal, met, f["baseline_full_table_kbit_per_node"],
                     f"{f['baseline_ratio']:.1f}x", round(f["wall_seconds"])])
    print(f"1 % loss, figures change every ~10 s, one round = {ROUND:g} s; per node, means over the nodes\n")
    print_table(["N", "simulated s", "messages/round", "body bytes/round", "wire bytes/round", "body kbit/s",
                 "wire kbit/s", "max node", "goal", "met", "baseline: whole tables kbit/s", "baseline/ours", "wall s"],
                rows)
    for f in cases:
        print(f"\nN = {f['n']}: bodies by message type, kbit/s per node:",
              {k: round(v, 2) for k, v in f["kbit_per_node_by_message"].items()})
        print("on-wire bytes beyond bodies, kbit/s per node:", {k: round(v, 2) for k, v in f["wire_kbit_per_node_by_kind"].items()})
        print(f"exchanges per node per s: {f['exchanges_per_node_per_s']:.2f}, "
              f"{f['share_of_exchanges_opening_a_connection']:.0%} of them open a connection")
    small = next((f for f in cases if f["n"] == 100), None)
    write_results("gossip_traffic", {
        "goal_kbit_at_n100": GOAL_KBIT,
        "goal_met": None if small is None else small["wire_kbit_per_node"] <= GOAL_KBIT,
        "cases": cases,
        "seconds": time.perf_counter() - started,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
