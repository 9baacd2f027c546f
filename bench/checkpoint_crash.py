"""kill -9 during checkpoint writes at random moments: is the newest readable checkpoint always intact?

Question: after >= 1,000 kills at random points of a write loop, how often is the task left
without a readable checkpoint, or with a damaged file that `latest()` had to skip? Goal: never.
Baseline in the same run: the same kills against a naive writer (open the final name, write,
no fsync, no rename), which shows that the test does catch torn checkpoints.
Since 2026-11-26 the store overwrites one of two slot files in place (these states are all under
SLOTS_BELOW): a kill mid-write tears the slot that did not hold the newest checkpoint, which is the
design (its hash fails, the other slot is read, the next write goes over it), so torn slots are
counted apart from damaged files; a damaged file is one that no write of the store's design leaves.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402

from frost_core.storage.checkpoints import (  # noqa: E402
    SLOT_NAMES, CheckpointRecord, CheckpointStore, encode_header, read_record,
)
from frost_core.api.errors import CheckpointError  # noqa: E402

TRIALS = int(os.environ.get("CRASH_TRIALS", "1000"))
TASK = "crash-1.0"


def state_for(seq: int) -> bytes:
    return bytes([seq % 251]) * (16 * 1024 * (1 + seq % 16))


def record_for(seq: int) -> CheckpointRecord:
    return CheckpointRecord.seal(task_id=TASK, plugin_name="p", plugin_version="1", plugin_hash="h",
                                 unit_index=0, epoch=1, seq=seq, taken_at=float(seq), state=state_for(seq))


def write_forever(root: Path, naive: bool) -> None:
    """The child: checkpoint after checkpoint until killed."""
    store = CheckpointStore(root)
    seq = 2
    while True:
        record = record_for(seq)
        if naive:
            path = root / TASK / f"{seq:016d}.ckpt"
            with open(path, "wb") as file:
                file.write(encode_header(record))
                file.write(record.state)
            for older in (root / TASK).glob("*.ckpt"):
                if older != path:
                    older.unlink()
        else:
            store.write(record)
        seq += 1


def trial(root: Path, rng: random.Random, naive: bool) -> tuple[bool, int, int]:
    """One kill; returns (intact, damaged files seen, torn slots seen)."""
    store = CheckpointStore(root)
    store.write(record_for(1))  # there is always an older checkpoint to fall back on
    pid = os.fork()
    if pid == 0:
        try:
            write_forever(root, naive)
        finally:
            os._exit(0)
    time.sleep(rng.uniform(0.0, 0.03))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    damaged = torn = 0
    for path in (root / TASK).glob("*.ckpt"):
        try:
            read_record(path)
        except (CheckpointError, OSError):
            torn += path.name in SLOT_NAMES and not naive
            damaged += path.name not in SLOT_NAMES or naive
    latest = store.latest(TASK)
    intact = latest is not None and latest.state == state_for(latest.seq)
    store.discard(TASK)
    return intact, damaged, torn


def main() -> None:
    logging.getLogger("frost_core.storage.checkpoints").setLevel(logging.ERROR)  # skipped files are counted instead
    rng = random.Random(2024)
    rows, figures = [], {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        for name, naive in (("CheckpointStore", False), ("naive writer (baseline)", True)):
            trials = TRIALS if not naive else max(TRIALS // 5, 50)
            began = time.perf_counter()
            lost = damaged_total = torn_total = 0
            for n in range(trials):
                intact, damaged, torn = trial(Path(tmp) / f"{int(naive)}-{n}", rng, naive)
                lost += not intact
                damaged_total += damaged
                torn_total += torn
            seconds = time.perf_counter() - began
            rows.append([name, trials, lost, damaged_total, torn_total, seconds])
            figures[name] = {"trials": trials, "no_intact_checkpoint": lost, "damaged_files": damaged_total,
                             "torn_slots": torn_total, "seconds": seconds}
    print_table(["writer", "kills", "no intact checkpoint", "damaged files left", "torn slots (by design)", "seconds"],
                rows)
    write_results("checkpoint_crash", figures)


if __name__ == "__main__":
    main()
