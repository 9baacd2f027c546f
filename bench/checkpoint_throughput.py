"""Checkpoint throughput (encode + seal + durable write) against a raw write+fsync of the same bytes.

Question: how much of the disk's durable-write speed does a checkpoint keep? Goal: >= 50 %.
"full" is the path a real checkpoint takes: `encode_state` (what the guest child runs) and then
`CheckpointStore.commit` with those bytes (what the supervisor runs once they arrive; the pipe
between the two is not timed). "node" is `commit` alone. The baseline is a plain write of the
encoded bytes to a file plus fsync, with no temp file, rename, directory fsync or hash.
Each round times full, node and raw once, in rotating order, in the same directory, after
WARMUP unmeasured rounds; the ratio raw/variant is taken within each round and its median
reported, so a slow moment of the shared machine hits both sides of a ratio alike.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402

from frost_core.storage.checkpoints import CheckpointStore  # noqa: E402
from frost_core.guest.state_codec import encode_state  # noqa: E402

REPEATS = {0.1: 31, 1: 21, 10: 11, 100: 7}
"""Measured rounds per state size in MB (each round times every variant and the raw write once)."""
WARMUP = 2


def make_state(size: int) -> dict:
    """A typical plugin state: a few counters and the bulk numbers as bytes."""
    return {"row": 17, "width": 640, "seed": 12345, "pixels": os.urandom(size)}


def main() -> None:
    rows, figures = [], {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        folder = Path(tmp)
        store = CheckpointStore(folder / "store")
        seqs = iter(range(1, 1 << 30))

        def commit(data: bytes) -> None:
            store.commit(task_id="bench-1.0", plugin_name="bench", plugin_version="1", plugin_hash="0" * 64,
                         unit_index=0, epoch=1, seq=next(seqs), taken_at=time.time(), state=data)

        for size_mb, repeats in REPEATS.items():
            state = make_state(int(size_mb * 1024 * 1024))
            encoded = encode_state(state)
            runs: dict[str, Callable[[], None]] = {
                "full": lambda: commit(encode_state(state, "state", 1 << 40)),
                "node": lambda: commit(encoded),
                "raw": lambda: write_raw(folder / "raw.bin", encoded),
            }
            times: dict[str, list[float]] = {name: [] for name in runs}
            for round_index in range(WARMUP + repeats):
                names = list(runs)
                shift = round_index % len(names)
                for name in names[shift:] + names[:shift]:
                    began = time.perf_counter()
                    runs[name]()
                    if round_index >= WARMUP:
                        times[name].append(time.perf_counter() - began)
            ratio = {name: statistics.median(raw / took for raw, took in zip(times["raw"], times[name]))
                     for name in ("full", "node")}
            median = {name: statistics.median(values) for name, values in times.items()}
            size = len(encoded)
            rows.append([size_mb, size / median["full"] / 1e6, size / median["raw"] / 1e6, ratio["full"],
                         ratio["node"], "yes" if ratio["full"] >= 0.5 else "NO"])
            figures[f"{size_mb}MB"] = {
                "state_bytes": size,
                "rounds": repeats,
                "median_seconds": median,
                "checkpoint_MBps": size / median["full"] / 1e6,
                "raw_MBps": size / median["raw"] / 1e6,
                "ratio_full": ratio["full"],
                "ratio_node_only": ratio["node"],
            }
    print_table(["state MB", "checkpoint MB/s", "raw write+fsync MB/s", "ratio full", "ratio node",
                 "full >= 50 %"], rows)
    write_results("checkpoint_throughput", figures)


def write_raw(path: Path, data: bytes) -> None:
    """The baseline: overwrite one file with the bytes and fsync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


if __name__ == "__main__":
    main()
