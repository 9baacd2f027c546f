"""Global checkpoint + restart time of a gang vs p and the state per member, members in real guests.

Question (issue 16): when a gang moves, all p members checkpoint at the barrier, the images go to
the master, and the gang restarts from them on the new p. How long do the capture and the restart
take, for p = 2, 3, 4 and a small (16 KiB, a small plate's strip), 1 MiB and 10 MiB of state per member?

The gang is `bench_plugins/gang_ballast.py` (incompressible ballast of exactly that size per
member, 50 ms supersteps) on the node's gang runtime (`_gang_cluster.py`: each host a real `Gangs`,
messages and checkpoint bulk through their wire encoding, members in sandboxed guests at the lowest
priority) on p + 1 hosts. At superstep 3 the owner's `move` of member 0 (`GangRuns.move`) makes
the gang leave that host at the next barrier: a global checkpoint and a restart, member 0 on the
spare host, the others where they were (each in a fresh guest of the new epoch). Timed from the
messages the nodes send:

- `capture`: the coordinator's TakeCheckpoint at the barrier -> the last of the p images sent to
  the master (each member's guest writes its MemberCheckpoint, the host checks it, it crosses);
- `on master's disk`: the same barrier -> the master's copy committed (`master.gang_checkpoints`:
  temp file, fsync, rename, as a node keeps it; the restart does not wait for it);
- `restart`: the first StartMember of the new epoch (images as bulk) -> the first superstep of the
  new epoch released (all p guests started from their images and through one superstep), less one
  superstep (the median before the move);
- baseline, in the same run: `cold start`, the same from the gang's first StartMember (fresh
  guests, states built by `start`), less one superstep.

The result is checked: every member's ballast digest matches a gang that never moved. Guests run
at SCHED_IDLE, so the load average is printed with the figures. About 1 minute on an idle 2-core
machine; `--quick`: p = 2, 16 KiB and 1 MiB.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import print_table, write_results  # noqa: E402
from bench._gang_cluster import GangCluster  # noqa: E402
from frost_core.policies.gang_migration import CheckCadence  # noqa: E402

BALLAST = Path(__file__).resolve().parent / "bench_plugins" / "gang_ballast.py"
SIZES = {"16 KiB": 16 << 10, "1 MiB": 1 << 20, "10 MiB": 10 << 20}
STEP_MS = 50
MOVE_AT = 3
SUPERSTEPS = MOVE_AT + 4


async def one_run(p: int, ballast: int, folder: Path) -> dict:
    cluster = GangCluster([f"h{i}" for i in range(p + 1)], folder)
    gang_id = f"ckpt{p}x{ballast}"
    params = {"members": p, "ballast_bytes": ballast, "supersteps": SUPERSTEPS, "step_ms": STEP_MS}
    async with cluster.running():
        # No checks: the only move is the owner's below.
        outcome = cluster.submit(gang_id, BALLAST, params, p, CheckCadence(None, None))
        while cluster.released(gang_id, MOVE_AT) is None and not outcome.ended.is_set():
            await trio.sleep(0.002)
        cluster.master.move(gang_id, 0, "the benchmark moves member 0")
        with trio.fail_after(600):
            await outcome.ended.wait()
        view = cluster.view(gang_id)
    if outcome.results is None:
        raise SystemExit(f"the gang failed: {outcome.failure}")
    expected = [hashlib.sha256(random.Random(rank).randbytes(ballast)).hexdigest() for rank in range(p)]
    if [r["digest"] for r in outcome.results] != expected or view.moves != 1:
        raise SystemExit(f"the gang's result is not the unmoved gang's, or it did not move once: {view}")
    checkpoint = view.last_checkpoint
    assert checkpoint is not None
    k = checkpoint.superstep
    sent = cluster.sent

    def first(kind: str, superstep: int) -> float:
        return sent[kind, gang_id, superstep][0]

    steps = [first("GangRelease", s + 1) - first("GangRelease", s) for s in range(1, k - 1)]
    superstep = statistics.median(steps)
    return {"p": p, "ballast_bytes": ballast, "checkpoint_superstep": k, "checkpoint_bytes": checkpoint.size,
            "superstep_seconds": superstep,
            "capture_seconds": sent["GangCheckpoint", gang_id, k][1] - first("GangTakeCheckpoint", k),
            "on_disk_seconds": cluster.kept[gang_id, k] - first("GangTakeCheckpoint", k),
            "restart_seconds": first("GangRelease", k + 1) - first("GangStart", k) - superstep,
            "cold_start_seconds": first("GangRelease", 1) - first("GangStart", 0) - superstep,
            "wire_bytes": cluster.wire_bytes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="p = 2; 16 KiB and 1 MiB")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    rows, figures = [], []
    for p in (2,) if args.quick else (2, 3, 4):
        for label, ballast in list(SIZES.items())[:2 if args.quick else 3]:
            with tempfile.TemporaryDirectory(prefix="gang-ckpt-") as folder:
                run = trio.run(one_run, p, ballast, Path(folder))
            figures.append(run)
            rows.append([p, label, run["checkpoint_bytes"] / 1e6, run["capture_seconds"] * 1000,
                         run["on_disk_seconds"] * 1000,
                         run["restart_seconds"] * 1000, run["cold_start_seconds"] * 1000,
                         run["restart_seconds"] / run["cold_start_seconds"], run["superstep_seconds"] * 1000])
    print_table(["p", "state/member", "global checkpoint MB", "capture ms", "on master's disk ms", "restart ms", "cold start ms",
                 "restart / cold start", "superstep ms"], rows)
    load_after = os.getloadavg()[0]
    print(f"load average {load_before:.1f} before, {load_after:.1f} after (guests at SCHED_IDLE wait for idle CPU)")
    write_results("gang_checkpoint", {"runs": figures, "step_ms": STEP_MS, "load_average": [load_before, load_after]})


if __name__ == "__main__":
    main()
