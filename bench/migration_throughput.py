"""Transfer throughput of a checkpoint move against a raw loopback socket copy of the same bytes, in the same run.

Question: how much of what the loopback can carry does moving a checkpoint keep? Goals: issue
15's, of the raw copy that keeps the bytes, >= 0.6 at 10 and 100 MiB and >= 0.5 at 1 MiB; issue
4's, >= 0.5 at every size, beside them (its baseline was changed after it failed: bench/README.md).

Isolated transfer: the move's transfer is one `UnitStart` call (`cluster.links`): open an
authenticated channel (handshake), send the header and the checkpoint as bulk chunks (AES-OCB3),
the receiver gathers the state into one bytes object and answers. The SHA-256 is not part of
the transfer: the destination checks it while it writes and fsyncs the state (that is in the
end-to-end figure). Here the sender is this process (a `NetworkTransport` + `Links`, as a
source host has) and the receiver a subprocess of this script with its own transport and
`Links`, whose host side answers "running" at once: no durable write, no guest.

Two raw baselines, in the same process pair, each a fresh TCP connection sending the bytes
and waiting for a one-byte acknowledgement (connect included, as a move connects afresh):
- kept, the goal's baseline: the receiver reads into one buffer of the copy's size, the
  cheapest way to end up holding the bytes, as a move's destination must;
- discarded: the receiver reads into one small reused buffer. That is the wire's ceiling, not
  a copy: it never pays for the fresh memory the bytes need (on these VMs about 60 ms per
  100 MiB of page faults, more than the copy itself).
Between them, to show where the difference goes: the same bytes as a bulk transfer on an
authenticated channel to a handler that only iterates over the chunks (what
bench/wire_loopback.py measures), compared with the discarding copy. Each trial times the four
back to back, rotating which goes first, and the ratios are taken within the trial; the table
shows medians over trials.

End-to-end (real nodes): two `frost-tui --headless` processes, a unit of the ballast plugin of
1, 10 and 100 MiB evicted back and forth (bench/migration_latency.py's procedure); the figure is
the checkpoint's size over the time from "guest left this machine" on the source to the guest's
start on the destination: negotiation, transfer (beside the source's own fsync of the capture),
SHA-256 during the durable write (fsync) at the destination and spawning the guest process,
against both raw copies (the kept one since issue 15), each timed just before its eviction.
Each size has END_TO_END_TRIALS measured evictions (after two unmeasured ones): the table shows
their min / median / max, and the same ratios over the whole of evict -> running (to the guest's
first step on the destination: how issue 15 measured "end to end") beside. Since issue 15 the
guest's start event on the destination comes before the checkpoint there is durable (the guest
loads its plugin meanwhile, and gets its state after), so the first figure no longer holds the
destination's fsync: the second one holds everything. Since the move that streams (issue 15, later)
an eviction's capture is sent while it comes up the guest's pipe, and the destination's start event
may come before the source's "guest left": the first figure can then be negative, meaningless. Run:
`.venv/bin/python bench/migration_throughput.py` (2-3 minutes; `--quick`: 1 MiB isolated, 10 MiB
end to end).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402
from _nodes import add_ballast_plugin, start_cluster, stop_all  # noqa: E402
from migration_latency import CONFIG as LATENCY_CONFIG  # noqa: E402
from migration_latency import _p95, _RawReceiver, measure_size  # noqa: E402

from frost_core.storage.checkpoints import CheckpointRecord  # noqa: E402
from frost_core.cluster.links import Links  # noqa: E402
from frost_core.cluster.messages import UnitSpec, Verdict  # noqa: E402
from frost_core.plugin.api import MAX_STATE_BYTES  # noqa: E402
from frost_core.cluster.replication import HeldReplicas  # noqa: E402
from frost_core.wire.transport import NetworkTransport, open_transport  # noqa: E402
from frost_core.wire.channel import Channel  # noqa: E402
from frost_core.wire.framing import MAX_CHUNK_SIZE  # noqa: E402
from frost_core.wire.messages import BulkEnd, Message  # noqa: E402
from frost_core.wire.security import ClusterKey  # noqa: E402

MIB = 1 << 20
SIZES_MIB = (1, 10, 100)
TRIALS = 9
WARMUP = 2
END_TO_END_MIB, END_TO_END_TRIALS = (1, 10, 100), {1: 3, 10: 3, 100: 5}
"""Measured evictions per size: at 100 MiB on a loaded machine some miss the owner's evict deadline
(0.8 s: the guest, at the lowest priority, cannot hand over its state in time) and go back through
the master's queue, which the table counts apart."""
GOAL_RATIO = 0.5
"""Issue 4's goal, of the raw copy that keeps the bytes (of the discarding one until 2026-11-24)."""
GOALS = {1: 0.5, 10: 0.6, 100: 0.6}
"""Issue 15's goals by size in MiB, of the raw copy that keeps the bytes."""
SENDER, RECEIVER = "bench-sender", "bench-receiver"
SPEC = UnitSpec(task_id="bench-1.0", assignment_id="bench-1", master=SENDER, plugin_name="bench", plugin_version="1",
                plugin_hash="0" * 64, unit=b"\xa0", memory_bytes=1, epoch=2)


# ---------------------------------------------------------------------------------------------
# Receiver process


class _ArrivingHost:
    """The destination's host side, answering a start at once: only the transfer is measured."""

    async def start(self, source, spec, record, *, moved=False) -> Verdict:
        return Verdict(ok=record is not None and record.task_id == spec.task_id)


class _NoMaster:
    """This benchmark's receiver is never asked anything as a master."""


async def _serve_raw(stream: trio.SocketStream) -> None:
    """Read a length-prefixed copy, then acknowledge it.

    Kept: into one buffer of the copy's size, the cheapest way for a receiver to end up holding
    the bytes, as a move's destination must. Discarded: into one small reused buffer, so only the
    wire is paid for (the ceiling, not a copy anyone could use).
    """
    header = b""
    while len(header) < 9:
        header += await stream.receive_some(9 - len(header))
    size, keep = int.from_bytes(header[:8], "big"), header[8:] == b"k"
    buffer = memoryview(bytearray(size if keep else MAX_CHUNK_SIZE + 4096))
    have = 0
    while have < size:
        count = await stream.socket.recv_into(buffer[have:] if keep else buffer)
        if not count:
            return
        have += count
    await stream.send_all(b"k")


async def _sink_bulk(channel: Channel, header: Message) -> None:
    """The channel's own bulk speed: take the chunks as they come (no joining, no hash), then acknowledge."""
    received = 0
    async for chunk in channel.iterate_bulk_data(max_size=MAX_STATE_BYTES):
        received += len(chunk)
    await channel.send(BulkEnd(received))


async def serve(key: ClusterKey) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with open_transport(key=key, node_id=RECEIVER, host="127.0.0.1") as transport, \
                trio.open_nursery() as nursery:
            links = Links(node_id=RECEIVER, address_of=lambda node: None)
            links.bind(master=_NoMaster(), host=_ArrivingHost(),  # type: ignore[arg-type]
                       keeper=HeldReplicas(Path(tmp)))
            links.install(transport)
            transport.set_stream_handler(BulkEnd.CODE, _sink_bulk)
            raw = await nursery.start(functools.partial(trio.serve_tcp, _serve_raw, 0, host="127.0.0.1"))
            print(raw[0].socket.getsockname()[1], transport.local_address[1], flush=True)
            await trio.to_thread.run_sync(sys.stdin.read)  # until the sender closes our stdin
            nursery.cancel_scope.cancel()


# ---------------------------------------------------------------------------------------------
# Sender (this process)


async def raw_copy(port: int, data: bytes, *, keep: bool) -> float:
    view = memoryview(data)
    began = time.perf_counter()
    async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
        await stream.send_all(len(data).to_bytes(8, "big") + (b"k" if keep else b"d"))
        for offset in range(0, len(view), MAX_CHUNK_SIZE):
            await stream.send_all(view[offset:offset + MAX_CHUNK_SIZE])
        assert await stream.receive_some(1) == b"k"
    return time.perf_counter() - began


async def channel_copy(transport: NetworkTransport, port: int, data: bytes) -> float:
    began = time.perf_counter()
    async with await transport.connect(("127.0.0.1", port)) as channel:
        await channel.send_bulk(BulkEnd(0), data)
        assert await channel.receive() == BulkEnd(len(data))
    return time.perf_counter() - began


async def move_copy(links: Links, record: CheckpointRecord) -> float:
    began = time.perf_counter()
    verdict = await links.host(RECEIVER).start(SENDER, SPEC, record, moved=True)
    took = time.perf_counter() - began
    assert verdict.ok, verdict.reason
    return took


async def measure(key: ClusterKey, raw_port: int, links_port: int, sizes: tuple[int, ...], trials_each: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        async with open_transport(key=key, node_id=SENDER, host="127.0.0.1") as transport:
            links = Links(node_id=SENDER, address_of={RECEIVER: ("127.0.0.1", links_port)}.get)
            links.bind(master=_NoMaster(), host=_ArrivingHost(),  # type: ignore[arg-type]
                       keeper=HeldReplicas(Path(tmp)))
            links.install(transport)
            figures = {}
            for size_mib in sizes:
                state = os.urandom(size_mib * MIB)
                record = CheckpointRecord.seal(task_id=SPEC.task_id, plugin_name="bench", plugin_version="1",
                                               plugin_hash=SPEC.plugin_hash, unit_index=0, epoch=SPEC.epoch, seq=1,
                                               taken_at=time.time(), state=state)
                trials = []
                for trial in range(WARMUP + trials_each):
                    runs = {"raw_kept": lambda: raw_copy(raw_port, state, keep=True),
                            "raw_discarded": lambda: raw_copy(raw_port, state, keep=False),
                            "channel": lambda: channel_copy(transport, links_port, state),
                            "move": lambda: move_copy(links, record)}
                    names = list(runs)[trial % len(runs):] + list(runs)[:trial % len(runs)]  # rotate who goes first
                    took = {name: await runs[name]() for name in names}
                    if trial >= WARMUP:
                        trials.append({**{f"{name}_MBps": len(state) / took[name] / 1e6 for name in runs},
                                       "ratio": took["raw_kept"] / took["move"],
                                       "ratio_to_discarded": took["raw_discarded"] / took["move"],
                                       "channel_ratio": took["raw_discarded"] / took["channel"]})
                figures[f"{size_mib}MiB"] = {
                    "bytes": len(state),
                    **{f"median_{name}": statistics.median(t[name] for t in trials) for name in trials[0]},
                    "per_trial": trials,
                }
            return figures


def isolated(sizes: tuple[int, ...], trials: int) -> dict:
    key = ClusterKey.generate()
    receiver = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env={**os.environ, "FROST_BENCH_KEY": key.to_join_code()}, text=True)
    try:
        raw_port, links_port = map(int, receiver.stdout.readline().split())  # type: ignore[union-attr]
        return trio.run(measure, key, raw_port, links_port, sizes, trials)
    finally:
        receiver.stdin.close()  # type: ignore[union-attr]
        receiver.wait(timeout=10)


def end_to_end(sizes_mib: tuple[int, ...], trials: dict[int, int]) -> dict:
    """Checkpoint bytes over (guest left the source -> guest started on the destination), real nodes, by size."""
    with tempfile.TemporaryDirectory(prefix="frost-bench-") as tmp:
        folder = Path(tmp)
        nodes = start_cluster(folder, ["a", "b"], LATENCY_CONFIG)
        try:
            add_ballast_plugin(nodes[0])
            receiver = _RawReceiver()
            return {f"{size}MiB": _end_to_end_figures(size, *measure_size(nodes, size * MIB, trials[size], folder,
                                                                          receiver))
                    for size in sizes_mib}
        finally:
            stop_all(nodes)


def _end_to_end_figures(size_mib: int, samples: list[dict], requeued: list[str]) -> dict:
    trials = [{"direction": s["direction"], "move_MBps": s["checkpoint_bytes"] / s["transfer_to_spawn_ms"] / 1e3,
               "raw_kept_MBps": s["checkpoint_bytes"] / s["raw_copy_kept_ms"] / 1e3,
               "raw_socket_MBps": s["checkpoint_bytes"] / s["raw_socket_ms"] / 1e3,
               "ratio_to_kept": s["raw_copy_kept_ms"] / s["transfer_to_spawn_ms"],
               "ratio": s["raw_socket_ms"] / s["transfer_to_spawn_ms"],
               "evict_to_running_ms": s["evict_to_running_ms"],
               "whole_ratio_to_kept": s["raw_copy_kept_ms"] / s["evict_to_running_ms"],
               "whole_ratio": s["raw_socket_ms"] / s["evict_to_running_ms"]}
              for s in samples if s["transfer_to_spawn_ms"]]
    if not trials:
        return {"state_MiB": size_mib, "not_moved_but_requeued": requeued}
    return {
        "state_MiB": size_mib,
        **{f"{stat}_{name}": function([t[name] for t in trials])
           for stat, function in (("min", min), ("median", statistics.median), ("max", max))
           for name in ("move_MBps", "raw_kept_MBps", "raw_socket_MBps", "ratio_to_kept", "ratio",
                        "evict_to_running_ms", "whole_ratio_to_kept", "whole_ratio")},
        "p95_evict_to_running_ms": _p95([t["evict_to_running_ms"] for t in trials]),
        "raw_socket_is": "the copy that discards the bytes (the name from before issue 15)",
        "covers": "negotiation, transfer (beside the source's fsync), SHA-256, durable write with fsync at the "
                  "destination, spawning the guest process",
        "not_moved_but_requeued": requeued,
        "per_trial": trials,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 MiB isolated, 10 MiB end to end, few trials")
    quick = parser.parse_args().quick
    sizes, trials = ((1,), 3) if quick else (SIZES_MIB, TRIALS)
    e2e_mib, e2e_trials = ((10,), {10: 2}) if quick else (END_TO_END_MIB, END_TO_END_TRIALS)
    figures = isolated(sizes, trials)
    rows = []
    for size, f in figures.items():
        goal = GOALS[int(size.removesuffix("MiB"))]
        f["goal_ratio_to_kept"] = goal
        rows.append([size, f["median_raw_kept_MBps"], f["median_raw_discarded_MBps"], f["median_channel_MBps"],
                     f["median_move_MBps"], f["median_channel_ratio"], f["median_ratio_to_discarded"],
                     f["median_ratio"], f"{goal}: {'yes' if f['median_ratio'] >= goal else 'NO'}",
                     "yes" if f["median_ratio"] >= GOAL_RATIO else "NO"])
    whole = end_to_end(e2e_mib, e2e_trials)
    ends = []
    for size, f in whole.items():
        if "median_ratio" not in f:
            print(f"{size} end to end: no eviction moved the unit ({f['not_moved_but_requeued']})")
            continue
        goal = GOALS[f["state_MiB"]]
        f["goal_ratio_to_kept"], f["goal_met_by_evict_to_running"] = goal, f["median_whole_ratio_to_kept"] >= goal
        spread = [f"{f['min_' + name]:.2f} / {f['median_' + name]:.2f} / {f['max_' + name]:.2f}"
                  for name in ("ratio_to_kept", "ratio", "whole_ratio_to_kept", "whole_ratio")]
        ends.append([size, f"{len(f['per_trial'])} (+{len(f['not_moved_but_requeued'])} via queue)", f["median_raw_kept_MBps"], f["median_raw_socket_MBps"],
                     f["median_move_MBps"], *spread,
                     f"{goal}: {'yes' if f['median_whole_ratio_to_kept'] >= goal else 'NO'}",
                     f["median_evict_to_running_ms"], f["p95_evict_to_running_ms"]])
    print_table(["checkpoint", "raw kept MB/s", "raw discarded MB/s", "channel MB/s", "move MB/s",
                 "channel/discarded", "move/discarded", "move/kept", "issue 15 goal of kept (the transfer alone)",
                 f"issue 4: >= {GOAL_RATIO:.0%} of kept"], rows)
    print("\nend to end, real nodes (guest left the source -> guest started on the destination):")
    print_table(["state", "trials", "raw kept MB/s", "raw discarded MB/s", "move MB/s",
                 "move/kept min/med/max", "move/discarded min/med/max", "evict->running: /kept",
                 "/discarded", "issue 15 goal (evict->running / kept, median)", "evict->running p50 ms", "p95"], ends)
    print("move/...: over guest left the source -> its start event on the destination (since issue 15 that event "
          "comes before the destination's fsync ends, which the guest's state waits for); evict->running /...: "
          "over the whole evict call -> first step on the destination, as issue 15 measured 'end to end', and what "
          "its goal is judged on (since the capture streams, 'left -> started' overlaps the capture and can even be "
          "negative: it is no measure of the move)")
    write_results("migration_throughput", {
        "setup": "isolated: UnitStart over an authenticated channel from this process to a receiver process whose "
                 "host side answers at once, against raw TCP copies to the same process that keep the bytes "
                 "(the goal's baseline) or discard them (the wire's ceiling); end to end: two real nodes, "
                 "eviction of a ballast unit, against raw copies that keep and that discard the bytes",
        "trials": trials,
        "goal_ratio": GOAL_RATIO,
        "goals_issue_15": GOALS,
        "quick": quick,
        "isolated": figures,
        "end_to_end": whole,
    })


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        trio.run(serve, ClusterKey.from_join_code(os.environ["FROST_BENCH_KEY"]))
    else:
        main()
