"""Checkpoint throughput on the path a guest really takes, against a raw write+fsync and a raw durable replace.

Question: how much of the disk's durable-write speed does a checkpoint keep? Goals (issue 15):
the guest path >= 0.6 of raw write+fsync from 1 MB up, and >= 0.8 of a raw durable replace at
every size. Variants, each timed once a round:
- guest: what a checkpoint costs from the node's request to a durable file, on the path a guest's
  takes. The node, inside trio as a node is, gives a child process (at a guest's priority, the
  lowest: in a session and so an autogroup of its own, `priority.lower_priority` first thing, as
  core/guest/child.py does; at normal priority until 2026-11-26 14:05 UTC, the figures in
  bench/README.md before that) a checkpoint memfd over a hand-off socketpair, as core/guest/running.py
  does on a unit's first request, then sends `GuestCheckpointRequest` with the checkpoint's
  identity prefix down a pipe; the child answers with the guest child's own code
  (`GuestRunner._encode_state`, `GuestRunner._pack`: the state's CBOR pieces, then the envelope
  with the unit's output files, none here; `GuestRunner._hand_out`: from HAND_OUT_FROM, 4 MiB, on
  the pieces written into the memfd, the answer with the size once they are, the hash after it,
  taken in the child's one thread; past 16 MiB the answer before the writing and the hash taken
  in a second thread beside it; below 4 MiB the state up the pipe, as "guest_pipe" takes it);
  the node copies the memfd to disk kernel to kernel and commits it as running.py does
  (`CheckpointStore.commit_handed` in a worker thread, the copy following the child's writing
  until its hash comes, then `settle_handed`: a memfd past 16 MiB emptied). Since 2026-11-26
  11:00 UTC (issue 15's checkpoint hand-out); before that "guest" timed what is now
  "guest_pipe". Until 2026-11-26 14:00 UTC the child handed states of every size through the
  memfd, under 4 MiB with the hash in the answer (0.1 and 1 MB: the figures in bench/README.md
  before that date); this docstring said "from 1 MiB on hashed in a second thread", which
  the child at 0d4ae67 did not do (its one thread hashed, past 16 MiB a second one);
  Since 2026-11-26 16:35 UTC (e6d1b84; as running.py does since then) the node's end, once it has sent the
  request, lends the pipe to a thread (`Channel.lend_pipe`) that reads the answer and commits a state
  under STAGE_FROM that comes up it (`running.answer_up_the_pipe`): the guest's answer wakes that
  thread, not trio's loop, and the loop learns once, of the durable checkpoint. Before, the loop read
  the answer and the state and handed the commit to a worker thread (two wake-ups more). Since
  2026-11-28 12:15 UTC (aeef050; as running.py does since) a state up the pipe from HASH_AFTER_FROM
  (256 KiB) on comes with the child's hash after it (`GuestRunner._answer`), and that thread writes
  the state while the child hashes, then seals it with that hash (`CheckpointStore.commit_claimed`):
  the node no longer hashes it; before, the node hashed it before (under 1 MiB) or beside its write;
- guest_pipe: the same child answering through its pipe (a request without the prefix, as a
  move's capture still goes): `write_bulk` up a pipe widened as the supervisor widens it; the
  node reads it with `Channel.receive_bulk_data` and commits it as running.py does: from
  STAGE_FROM bytes on, written and hashed while it arrives (`CheckpointStore.receiving`), then
  `commit(staged=...)`, in a worker thread;
- guest_from_thread: this script's "guest" until 2026-11-26 09:00 UTC, kept beside it: the child's
  end a thread of this process (sharing its GIL) and every round entered into trio from a worker
  thread (`trio.from_thread.run`) with a nursery of its own, which a node already inside trio never
  pays (~0.3 ms a round here). Before that (until 2026-11-26) "guest" timed a join of the pieces
  in place of the pipe, then `commit` of the whole (the `guest_join_...` figures in results
  before that date);
- bare: `encode_state` + `commit` without the envelope (this script's "full" figure before
  issue 15, kept for comparison: it measured less than a guest does);
- node: `commit` of the enveloped bytes alone.
Baselines, same bytes (the enveloped state), same directory:
- raw write+fsync: overwrite one file and fsync it (no temp file, rename, directory fsync, hash);
- raw durable replace: write a temp file, fsync, rename over the old one, fsync the directory:
  the least any crash-safe replace must do.
The two goals' baselines are unchanged since issue 15 set them. Beside them, no goal's (since
2026-11-26 11:20 UTC): raw in-place overwrite + fdatasync, the bytes written at offset 0 of an
existing file (no O_TRUNC, rename or directory fsync), alternately into two files as the store's
two slots are: what a checkpoint under SLOTS_BELOW costs the disk, without hash, header or
hand-off. It is why the guest path may beat "raw": an O_TRUNC overwrite frees and reallocates
the file's blocks and fsync commits that and the inode's times, which an fdatasync of blocks
already allocated does not wait for.
Each round times every variant in an order of its own (shuffled, seeded: the same each run)
after WARMUP unmeasured rounds; until 2026-11-26 14:10 UTC the order rotated, so each variant
always followed the same one, and "guest_pipe" always came right after "guest", with the node's
loop and threads (and, while they shared a child, the child) just woken by it: at 0.1 and 1 MB
it read 10-15 % faster than "guest" when both took the same path. Since then "guest_pipe" has a
child of its own too. A ratio
baseline/variant is taken within each round and its median reported, so a slow moment of the
shared machine hits both sides of a ratio alike. After each variant the next one waits, untimed,
until no file of the run is held open after its removal (since 2026-11-26): the store frees a
replaced checkpoint in a thread once the commit returned, as a node does between checkpoints
minutes apart, and that work must not land in the next variant's time (in a fixed order, "raw"
always follows "node"). A fixed 30 ms sleep did that in two runs of 2026-11-26 and made the
guest's path ~1 ms slower even on tmpfs: after a sleep each of its process and thread wake-ups
finds an idle CPU to wake first. Quick run: `--sizes 0.1,1`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import os
import random
import statistics
import subprocess
import sys
import socket
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402

import trio  # noqa: E402
import trio.testing  # noqa: E402

from frost_core.guest import envelope, handoff  # noqa: E402
from frost_core.guest.child import GuestRunner  # noqa: E402
from frost_core.guest.priority import lower_priority  # noqa: E402
from frost_core.guest.protocol import GuestCheckpoint, GuestCheckpointHash, GuestCheckpointRequest  # noqa: E402
from frost_core.guest.running import answer_up_the_pipe, settle_handed  # noqa: E402
from frost_core.guest.spawn import widen_pipe  # noqa: E402
from frost_core.guest.state_codec import encode_state  # noqa: E402
from frost_core.storage.checkpoints import CheckpointStore, identity_prefix  # noqa: E402
from frost_core.storage.staging import STAGE_FROM, StagingSink  # noqa: E402
from frost_core.wire.channel import Channel  # noqa: E402
from frost_core.wire.pipe import read_frame, write_bulk  # noqa: E402

REPEATS = {0.1: 31, 1: 21, 10: 11, 100: 7}
"""Measured rounds per state size in MB (each round times every variant and every baseline once)."""
WARMUP = 2
ORDER_SEED = 15
"""Seeds the order of the variants in each round, so every run of a size times them in the same orders."""
LIMIT = 1 << 40
GOAL_RAW = 0.6
"""Of raw write+fsync, from 1 MB up."""
GOAL_REPLACE = 0.8
"""Of a raw durable replace, at every size."""


def make_state(size: int) -> dict:
    """A typical plugin state: a few counters and the bulk numbers as bytes."""
    return {"row": 17, "width": 640, "seed": 12345, "pixels": os.urandom(size)}


def guest_runner(output_dir: Path, handoff_end: socket.socket | None = None) -> GuestRunner:
    """The guest child's runner, with an empty output folder: its state encoding and hand-out are used."""
    runner = GuestRunner(sys.stdin.buffer, sys.stdout.buffer, handoff=handoff_end)
    runner.output_dir = output_dir
    runner.max_state_bytes = LIMIT
    return runner


async def receive_and_commit(channel: Channel, store: CheckpointStore, identity: dict, outbox: int = -1,
                             request_id: int | None = None) -> None:
    """The node's end of a checkpoint, as core/guest/running.py takes it: for an open request (`request_id`)
    the pipe lent to a thread that reads the answer and commits a state under STAGE_FROM that comes up it
    (`answer_up_the_pipe`, the loop woken once, by the durable checkpoint); else the answer read by the
    loop, then a state handed through the `outbox` memfd copied to disk while its hash comes
    (`_take_handed`), or the state up the pipe, a big one written while it arrives, then the commit in a
    worker thread."""
    if request_id is not None and channel.lendable:
        answer, record = await channel.lend_pipe(functools.partial(
            answer_up_the_pipe, request_id=request_id, limit=LIMIT, take=lambda: True,
            commit=lambda data, claimed: (store.commit(**identity, state=data) if claimed is None
                                          else store.commit_claimed(data, claimed, **identity))))
        if record is not None:
            return
    else:
        answer = await channel.receive()
    if isinstance(answer, GuestCheckpoint) and answer.handed:
        sha256: Future[str] = Future()
        commit = store.copy_handed(outbox, answer.handed, LIMIT, sha256, **identity).result
        sealed = await channel.receive()
        assert isinstance(sealed, GuestCheckpointHash)
        sha256.set_result(sealed.sha256)
        await trio.to_thread.run_sync(functools.partial(settle_handed, commit, outbox,
                                                        empty=answer.handed > handoff.KEEP_OUTBOX_BYTES))
        return
    staging = StagingSink(functools.partial(store.receiving, **identity), from_size=STAGE_FROM)
    try:
        data = await channel.receive_bulk_data(max_size=LIMIT, sink=staging)
        await trio.to_thread.run_sync(functools.partial(store.commit, **identity, state=data, staged=staging.incoming))
    finally:
        await staging.abort()


class GuestPipe:
    """A guest child's pipe to its node, both ends in this process: the child's end written from a thread
    (the "guest_from_thread" variant)."""

    def __init__(self) -> None:
        read_end, write_end = os.pipe()
        widen_pipe(write_end)
        self.child_end = os.fdopen(write_end, "wb")
        self.node_end = Channel(trio.testing.MemorySendStream(), trio.lowlevel.FdStream(read_end))

    async def checkpoint(self, runner: GuestRunner, state: dict, store: CheckpointStore, identity: dict) -> None:
        """The child encodes and sends `state`; the node receives and commits it as core/guest/running.py does."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, self._send, runner, state)
            await receive_and_commit(self.node_end, store, identity)

    def _send(self, runner: GuestRunner, state: dict) -> None:
        pieces = runner._pack(envelope.STATE, runner._encode_state(state), LIMIT)
        write_bulk(self.child_end, GuestCheckpoint(request_id=1, progress=0.5, steps=1, encode_seconds=0.0), pieces)


class GuestProcess:
    """A child process answering checkpoint requests with the guest child's code, over real pipes both ways
    and, as a guest, a hand-off socket its checkpoint memfd comes on."""

    def __init__(self, size: int) -> None:
        to_child_read, to_child_write = os.pipe()
        from_child_read, from_child_write = os.pipe()
        for pipe_end in (to_child_write, from_child_write):
            widen_pipe(pipe_end)
        opened = handoff.open_handoff()
        assert opened is not None, "the guest path's hand-out needs Linux"
        self.handoff, guest_end = opened
        try:
            self.process = subprocess.Popen([sys.executable, __file__, "--child", str(size), str(guest_end)],
                                            stdin=to_child_read, stdout=from_child_write, pass_fds=(guest_end,),
                                            start_new_session=True)  # its own autogroup, as a guest's
        finally:
            os.close(to_child_read)
            os.close(from_child_write)
            os.close(guest_end)
        self.node_end = Channel(trio.lowlevel.FdStream(to_child_write), trio.lowlevel.FdStream(from_child_read))
        self.requests = iter(range(1, 1 << 30))
        self.outbox = handoff.open_outbox()
        handoff.hand_outbox(self.handoff, self.outbox)

    async def checkpoint(self, store: CheckpointStore, identity: dict, *, through_pipe: bool = False) -> None:
        """Ask for the state (through the memfd, as running.py asks, or the pipe); receive and commit it."""
        prefix = b"" if through_pipe else identity_prefix(identity)
        # Room for any size: this child has no memory cap (a node offers what the guest's cap leaves, limits.outbox_room).
        request_id = next(self.requests)
        await self.node_end.send(GuestCheckpointRequest(request_id=request_id, hash_prefix=prefix,
                                                        outbox_room=0 if through_pipe else LIMIT))
        await receive_and_commit(self.node_end, store, identity, self.outbox, request_id)

    async def aclose(self) -> None:
        await self.node_end.aclose()  # the child reads the end of its input and leaves
        await trio.to_thread.run_sync(self.process.wait)
        self.handoff.close()
        os.close(self.outbox)


def child(size: int, handoff_fd: int) -> None:
    """The child's end of `GuestProcess`: at a guest's priority, each request answered with a state of `size`
    random bytes, as `GuestRunner._answer_requests` answers (through the memfd where the request allows it)."""
    for step, outcome in lower_priority().steps:
        if outcome != "ok":
            print(f"checkpoint_throughput: the child's {step}: {outcome}", file=sys.stderr)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as output_dir:
        runner = guest_runner(Path(output_dir), socket.socket(fileno=handoff_fd))
        state = make_state(size)
        inbox, outbox = sys.stdin.buffer, sys.stdout.buffer
        while True:
            try:
                request = read_frame(inbox)
            except EOFError:
                return
            assert isinstance(request, GuestCheckpointRequest)
            pieces = runner._pack(envelope.STATE, runner._encode_state(state), LIMIT)
            header = GuestCheckpoint(request_id=request.request_id, progress=0.5, steps=1, encode_seconds=0.0)
            runner._answer(request, header, pieces)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(int(sys.argv[2]), int(sys.argv[3]))
        return
    trio.run(_main)


async def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(str(s) for s in REPEATS),
                        help="state sizes in MB, from " + ", ".join(str(s) for s in REPEATS))
    args = parser.parse_args()
    sizes = [float(s) if "." in s else int(s) for s in args.sizes.split(",")]
    rows, figures = [], {"goal_of_raw_write_fsync": GOAL_RAW, "goal_of_raw_durable_replace": GOAL_REPLACE}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        folder = Path(tmp)
        (folder / "out").mkdir()
        runner = guest_runner(folder / "out")
        store = CheckpointStore(folder / "store")
        (folder / "replace").mkdir()
        seqs = iter(range(1, 1 << 30))
        slots = itertools.cycle((0, 1))
        pipe = GuestPipe()

        def identity() -> dict:
            return dict(task_id="bench-1.0", plugin_name="bench", plugin_version="1", plugin_hash="0" * 64,
                        unit_index=0, epoch=1, seq=next(seqs), taken_at=time.time())

        def commit(data: bytes) -> None:
            store.commit(**identity(), state=data)

        for size_mb in sizes:
            repeats = REPEATS.get(size_mb, 11)
            state = make_state(int(size_mb * 1024 * 1024))
            packed = b"".join(runner._pack(envelope.STATE, runner._encode_state(state), LIMIT))
            guest, piping = GuestProcess(len(state["pixels"])), GuestProcess(len(state["pixels"]))
            runs: dict[str, Callable[[], None] | Callable[[], Awaitable[None]]] = {
                "guest": lambda: guest.checkpoint(store, identity()),
                "guest_pipe": lambda: piping.checkpoint(store, identity(), through_pipe=True),
                "guest_from_thread": lambda: trio.from_thread.run(pipe.checkpoint, runner, state, store, identity()),
                "bare": lambda: commit(encode_state(state, "state", LIMIT)),
                "node": lambda: commit(packed),
                "raw": lambda: write_raw(folder / "raw.bin", packed),
                "replace": lambda: replace_raw(folder / "replace", packed),
                "inplace": lambda: inplace_raw(folder / f"inplace-{next(slots)}.bin", packed),
            }
            times: dict[str, list[float]] = {name: [] for name in runs}
            try:
                await _time_rounds(runs, {"guest", "guest_pipe"}, times, WARMUP + repeats, folder)
            finally:
                try:
                    await guest.aclose()
                finally:
                    await piping.aclose()
            variants = ("guest", "guest_pipe", "guest_from_thread", "bare", "node")
            of_raw = {name: statistics.median(raw / took for raw, took in zip(times["raw"], times[name]))
                      for name in variants}
            of_replace = {name: statistics.median(base / took for base, took in zip(times["replace"], times[name]))
                          for name in variants}
            of_inplace = statistics.median(base / took for base, took in zip(times["inplace"], times["guest"]))
            median = {name: statistics.median(values) for name, values in times.items()}
            size = len(packed)
            met = of_replace["guest"] >= GOAL_REPLACE and (size_mb < 1 or of_raw["guest"] >= GOAL_RAW)
            rows.append([size_mb, size / median["guest"] / 1e6, size / median["raw"] / 1e6,
                         size / median["replace"] / 1e6, size / median["inplace"] / 1e6, of_raw["guest"],
                         of_replace["guest"], of_inplace,
                         of_raw["guest_pipe"], of_replace["guest_pipe"], of_raw["guest_from_thread"],
                         of_replace["guest_from_thread"], of_raw["bare"],
                         of_raw["node"], of_replace["node"], "yes" if met else "NO"])
            figures[f"{size_mb}MB"] = {
                "state_bytes": size,
                "rounds": repeats,
                "median_seconds": median,
                "guest_MBps": size / median["guest"] / 1e6,
                "raw_MBps": size / median["raw"] / 1e6,
                "raw_replace_MBps": size / median["replace"] / 1e6,
                "raw_inplace_MBps": size / median["inplace"] / 1e6,
                "ratio_guest_of_raw": of_raw["guest"],
                "ratio_guest_of_replace": of_replace["guest"],
                "ratio_guest_of_inplace": of_inplace,
                "ratio_guest_pipe_of_raw": of_raw["guest_pipe"],
                "ratio_guest_pipe_of_replace": of_replace["guest_pipe"],
                "ratio_guest_from_thread_of_raw": of_raw["guest_from_thread"],
                "ratio_guest_from_thread_of_replace": of_replace["guest_from_thread"],
                "ratio_bare_of_raw": of_raw["bare"],
                "ratio_node_of_raw": of_raw["node"],
                "ratio_node_of_replace": of_replace["node"],
                "goal_met": met,
            }
    print_table(["state MB", "guest MB/s", "raw write+fsync MB/s", "raw replace MB/s",
                 "raw in-place overwrite + fdatasync MB/s (no goal's)", "guest/raw", "guest/replace",
                 "guest/in-place", "guest_pipe/raw ('guest' until 11:00)", "guest_pipe/replace",
                 "guest_from_thread/raw (old 'guest')", "guest_from_thread/replace",
                 "bare/raw (old 'full')", "node/raw", "node/replace",
                 f">= {GOAL_RAW} raw (1 MB up), >= {GOAL_REPLACE} replace"], rows)
    write_results("checkpoint_throughput", figures)


async def _time_rounds(runs: dict[str, Callable[[], None] | Callable[[], Awaitable[None]]], in_trio: set[str],
                       times: dict[str, list[float]], rounds: int, folder: Path) -> None:
    """Time each variant once a round, in an order shuffled anew each round: those in `in_trio` on trio's
    thread (as a node's loop runs them), the others in a worker thread, timed there (the old guest's enters
    trio); between two, untimed, until what one left to free under `folder` is freed."""
    order = random.Random(ORDER_SEED)
    for round_index in range(rounds):
        names = list(runs)
        order.shuffle(names)
        for name in names:
            if name in in_trio:
                began = time.perf_counter()
                await runs[name]()  # type: ignore[misc]
                took = time.perf_counter() - began
            else:
                took = await trio.to_thread.run_sync(_time_one, runs[name])
            if round_index >= WARMUP:
                times[name].append(took)
            await trio.to_thread.run_sync(_wait_freed, folder)


def _wait_freed(folder: Path) -> None:
    """Until no file under `folder` is held open after its removal (Linux; elsewhere at once)."""
    prefix = str(folder)
    while any(path.startswith(prefix) and path.endswith(" (deleted)") for path in _open_files()):
        time.sleep(0.0002)


def _open_files() -> list[str]:
    paths = []
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):  # an fd may close while it is listed
                paths.append(os.readlink(f"/proc/self/fd/{name}"))
    return paths


def _time_one(run: Callable[[], None]) -> float:
    began = time.perf_counter()
    run()
    return time.perf_counter() - began


def write_raw(path: Path, data: bytes) -> None:
    """The first baseline: overwrite one file with the bytes and fsync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_raw(folder: Path, data: bytes) -> None:
    """The second baseline: write a temp file, fsync, rename it over the old one, fsync the directory."""
    temp, final = folder / "state.tmp", folder / "state"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temp, final)
    directory = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def inplace_raw(path: Path, data: bytes) -> None:
    """The third baseline (no goal's): overwrite the file in place from offset 0, no O_TRUNC, and fdatasync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        _write_all(fd, data)
        os.fdatasync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


if __name__ == "__main__":
    main()
