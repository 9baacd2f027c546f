"""Checkpoint throughput (encode + seal + durable write) against a raw write+fsync of the same bytes.

Question: how much of the disk's durable-write speed does a checkpoint keep? Goal: >= 50 %.
"full" is encode + durable write in one process (`encode_state_pieces` straight into
`CheckpointStore.commit`: the bulk bytes go to disk uncopied while a second thread hashes and
joins them for the returned record); "node" is the node's part alone (state already encoded);
"cbor2" is the full path with a plain `cbor2.dumps(canonical=True)` encode, for comparison.
SHA-256 runs at about 500 MB/s on these machines, no faster than the page cache plus fsync, so
the hash (required by the issue) bounds the ratio for big states.
Each variant is measured alternately several times in the same directory; medians are reported.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402

from frost_core.checkpoint_store import CheckpointStore  # noqa: E402
from frost_core.guest.state_codec import encode_state, encode_state_pieces  # noqa: E402
from frost_core.plugin_api import encode_plain  # noqa: E402

REPEATS = {0.1: 15, 1: 11, 10: 7, 100: 5}
"""Rounds per state size in MB (each round measures every variant and the raw write once)."""


def make_state(size: int) -> dict:
    """A typical plugin state: a few counters and the bulk numbers as bytes."""
    return {"row": 17, "width": 640, "seed": 12345, "pixels": os.urandom(size)}


def checkpoint_once(store: CheckpointStore, state: dict | bytes, seq: int, encoder) -> float:
    began = time.perf_counter()
    data = state if encoder is None else encoder(state, "state", 1 << 40)
    store.commit(
        task_id="bench-1.0", plugin_name="bench", plugin_version="1", plugin_hash="0" * 64,
        unit_index=0, epoch=1, seq=seq, taken_at=time.time(), state=data,
    )
    return time.perf_counter() - began


def raw_once(folder: Path, data: bytes) -> float:
    path = folder / "raw.bin"
    began = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - began


def main() -> None:
    rows, figures = [], {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        folder = Path(tmp)
        store = CheckpointStore(folder / "store")
        seq = 0
        for size_mb, repeats in REPEATS.items():
            state = make_state(int(size_mb * 1024 * 1024))
            encoded = encode_state(state)
            variants = {"full": (state, encode_state_pieces), "node": (encoded, None), "cbor2": (state, encode_plain)}
            times: dict[str, list[float]] = {name: [] for name in (*variants, "raw")}
            for _ in range(repeats):
                for name, (value, encoder) in variants.items():
                    seq += 1
                    times[name].append(checkpoint_once(store, value, seq, encoder))
                times["raw"].append(raw_once(folder, encoded))
            median = {name: statistics.median(values) for name, values in times.items()}
            ratios = {name: median["raw"] / median[name] for name in variants}
            size = len(encoded)
            rows.append([size_mb, size / median["full"] / 1e6, size / median["raw"] / 1e6, ratios["full"],
                         ratios["node"], ratios["cbor2"], "yes" if ratios["full"] >= 0.5 else "NO"])
            figures[f"{size_mb}MB"] = {
                "state_bytes": size,
                "seconds": median,
                "checkpoint_MBps": size / median["full"] / 1e6,
                "raw_MBps": size / median["raw"] / 1e6,
                "ratio_full": ratios["full"],
                "ratio_node_only": ratios["node"],
                "ratio_with_cbor2_encode": ratios["cbor2"],
            }
    print_table(["state MB", "checkpoint MB/s", "raw write+fsync MB/s", "ratio full", "ratio node",
                 "ratio cbor2", "full >= 50 %"], rows)
    write_results("checkpoint_throughput", figures)

if __name__ == "__main__":
    main()
