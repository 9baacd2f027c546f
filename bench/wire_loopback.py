"""How much do framing, CBOR and AES-OCB3 cost on loopback, against a raw trio socket in the same run?

Two questions, each answered for an authenticated `Channel` and for a raw `trio.SocketStream`
doing the same byte movement: the round-trip latency of a small message (p50/p95), and bulk
throughput (64 MB in 256 KiB chunks). Goal: the channel reaches at least 50 % of the raw figure.

Client and server run in separate processes, as two nodes would, for the raw baseline and the
channel alike: this process is the client, a subprocess of this script is the server. Each
trial measures raw and channel back to back and computes their ratio within the trial, so the
machine's noise (it is shared) hits both sides of a ratio alike; the table shows medians over
trials.
"""

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results  # noqa: E402

from frost_core.wire.channel import accept_channel, open_channel  # noqa: E402
from frost_core.wire.framing import MAX_CHUNK_SIZE  # noqa: E402
from frost_core.wire.messages import BulkEnd, Hello, encode_message  # noqa: E402
from frost_core.wire.security import ClusterKey  # noqa: E402

ROUND_TRIPS = 2000
WARMUP = 200
BULK_BYTES = 64 * 1024 * 1024
TRIALS = 9
SMALL = Hello(1, "a-node-id-of-typical-length-0123", b"n" * 32, 40000)
FRAME_SIZE = 6 + len(encode_message(SMALL)) + 16
"""Bytes of one small message on the wire; the raw baseline echoes exactly this many."""

_ECHO, _SINK = b"e", b"s"
"""First byte on a raw connection: what the raw server is asked to do with it."""


async def _receive_exactly(stream: trio.SocketStream, size: int) -> bytes:
    parts = bytearray()
    while len(parts) < size:
        data = await stream.receive_some(size - len(parts))
        if not data:
            raise EOFError
        parts += data
    return bytes(parts)


# ---------------------------------------------------------------------------------------------
# Server process


async def _serve_raw(stream: trio.SocketStream) -> None:
    """Echo FRAME_SIZE-byte messages, or swallow BULK_BYTES and answer one byte when all are in."""
    try:
        mode = await _receive_exactly(stream, 1)
        if mode == _ECHO:
            while True:
                await stream.send_all(await _receive_exactly(stream, FRAME_SIZE))
        # recv_into one reused buffer, the cheapest way a trio socket can take bulk data in (the
        # channel does the same for its large frames), so the baseline is not handicapped.
        buffer = memoryview(bytearray(MAX_CHUNK_SIZE + 4096))
        received = 0
        while received < BULK_BYTES:
            count = await stream.socket.recv_into(buffer)
            if not count:
                raise EOFError
            received += count
        await stream.send_all(b"k")
    except (EOFError, trio.BrokenResourceError):
        pass


async def _serve_channel(key: ClusterKey, stream: trio.SocketStream) -> None:
    """Echo messages; a BulkEnd header starts a bulk transfer, acknowledged with its size."""
    channel = await accept_channel(stream, key, "server")
    try:
        while True:
            message = await channel.receive()
            if isinstance(message, BulkEnd):
                received = 0
                async for chunk in channel.iterate_bulk_data(max_size=BULK_BYTES):
                    received += len(chunk)
                await channel.send(BulkEnd(received))
            else:
                await channel.send(message)
    except (trio.EndOfChannel, trio.BrokenResourceError):
        pass


async def serve(key: ClusterKey) -> None:
    async with trio.open_nursery() as nursery:
        raw = await nursery.start(trio.serve_tcp, _serve_raw, 0)
        channel = await nursery.start(trio.serve_tcp, lambda s: _serve_channel(key, s), 0)
        print(raw[0].socket.getsockname()[1], channel[0].socket.getsockname()[1], flush=True)
        await trio.to_thread.run_sync(sys.stdin.read)  # until the client closes our stdin
        nursery.cancel_scope.cancel()


# ---------------------------------------------------------------------------------------------
# Client (this process)


def _percentiles(samples: list[float]) -> tuple[float, float]:
    return statistics.median(samples) * 1e6, statistics.quantiles(samples, n=20)[18] * 1e6


async def raw_round_trips(port: int) -> list[float]:
    payload = b"x" * FRAME_SIZE
    async with await trio.open_tcp_stream("127.0.0.1", port) as client:
        await client.send_all(_ECHO)
        samples = []
        for n in range(WARMUP + ROUND_TRIPS):
            start = time.perf_counter()
            await client.send_all(payload)
            await _receive_exactly(client, FRAME_SIZE)
            if n >= WARMUP:
                samples.append(time.perf_counter() - start)
    return samples


async def channel_round_trips(port: int, key: ClusterKey) -> list[float]:
    async with await open_channel(("127.0.0.1", port), key, "client") as client:
        samples = []
        for n in range(WARMUP + ROUND_TRIPS):
            start = time.perf_counter()
            await client.send(SMALL)
            reply = await client.receive()
            if n >= WARMUP:
                samples.append(time.perf_counter() - start)
        assert reply == SMALL
    return samples


async def raw_bulk(port: int, data: bytes) -> float:
    view = memoryview(data)
    async with await trio.open_tcp_stream("127.0.0.1", port) as client:
        await client.send_all(_SINK)
        start = time.perf_counter()
        for offset in range(0, len(view), MAX_CHUNK_SIZE):
            await client.send_all(view[offset : offset + MAX_CHUNK_SIZE])
        assert await _receive_exactly(client, 1) == b"k"
        return len(data) / (time.perf_counter() - start)


async def channel_bulk(port: int, key: ClusterKey, data: bytes) -> float:
    async with await open_channel(("127.0.0.1", port), key, "client") as client:
        start = time.perf_counter()
        await client.send_bulk(BulkEnd(0), data)
        assert await client.receive() == BulkEnd(len(data))
        return len(data) / (time.perf_counter() - start)


async def measure(raw_port: int, channel_port: int, key: ClusterKey) -> list[dict]:
    data = os.urandom(BULK_BYTES)
    trials = []
    for _ in range(TRIALS):
        raw_p50, raw_p95 = _percentiles(await raw_round_trips(raw_port))
        chan_p50, chan_p95 = _percentiles(await channel_round_trips(channel_port, key))
        raw_tp = await raw_bulk(raw_port, data)
        chan_tp = await channel_bulk(channel_port, key, data)
        trials.append(
            {
                "raw_rtt_p50_us": raw_p50,
                "raw_rtt_p95_us": raw_p95,
                "channel_rtt_p50_us": chan_p50,
                "channel_rtt_p95_us": chan_p95,
                "rtt_p50_ratio_raw_over_channel": raw_p50 / chan_p50,
                "rtt_p95_ratio_raw_over_channel": raw_p95 / chan_p95,
                "raw_bulk_MBps": raw_tp / 1e6,
                "channel_bulk_MBps": chan_tp / 1e6,
                "bulk_ratio_channel_over_raw": chan_tp / raw_tp,
            }
        )
    return trials


def main() -> None:
    key = ClusterKey.generate()
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "FROST_BENCH_KEY": key.to_join_code()},
        text=True,
    )
    try:
        raw_port, channel_port = map(int, server.stdout.readline().split())  # type: ignore[union-attr]
        trials = trio.run(measure, raw_port, channel_port, key)
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(timeout=10)

    def median(name: str) -> float:
        return statistics.median(trial[name] for trial in trials)

    figures = {
        "setup": "client and server in separate processes, for raw and channel alike",
        "small_message_bytes_on_wire": FRAME_SIZE,
        "round_trips_per_trial": ROUND_TRIPS,
        "bulk_bytes": BULK_BYTES,
        "bulk_chunk_bytes": MAX_CHUNK_SIZE,
        "trials": TRIALS,
        **{f"median_{name}": median(name) for name in trials[0]},
        "goal_ratio": 0.5,
        "per_trial": trials,
    }
    print_table(
        ["median over trials", "raw trio socket", "Channel (AES-OCB3)", "ratio in trial (goal >= 0.5)"],
        [
            [
                "small round trip p50 (us)",
                median("raw_rtt_p50_us"),
                median("channel_rtt_p50_us"),
                median("rtt_p50_ratio_raw_over_channel"),
            ],
            [
                "small round trip p95 (us)",
                median("raw_rtt_p95_us"),
                median("channel_rtt_p95_us"),
                median("rtt_p95_ratio_raw_over_channel"),
            ],
            [
                "bulk 64 MB (MB/s)",
                median("raw_bulk_MBps"),
                median("channel_bulk_MBps"),
                median("bulk_ratio_channel_over_raw"),
            ],
        ],
    )
    print(
        "ratios per trial: rtt "
        + " ".join(f"{t['rtt_p50_ratio_raw_over_channel']:.2f}" for t in trials)
        + " | bulk "
        + " ".join(f"{t['bulk_ratio_channel_over_raw']:.2f}" for t in trials)
    )
    write_results("wire_loopback", figures)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        trio.run(serve, ClusterKey.from_join_code(os.environ["FROST_BENCH_KEY"]))
    else:
        main()
