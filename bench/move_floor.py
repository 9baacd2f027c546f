"""The fastest an eviction could move a state on this machine, against the raw copy that keeps the bytes.

Question: issue 15's move goals (evict -> running >= 0.5 of the kept copy at 1 MiB, >= 0.6 at 10 and
100 MiB) are judged on one 2-CPU machine that holds both nodes and both guests. What is the least
time any implementation could take here, given what a move must do, and is the goal above it?

A move must, at least: get the state out of the guest's process (guest code runs in a confined
process of its own), seal it for the wire (AES-OCB3, as the cluster's channel does), carry it over a
loopback socket, open it, hash it (the checkpoint's SHA-256), write it to a file and make that
durable (the source drops its copy only then), and get it into a new guest process as the `bytes`
the plugin API hands a state in, that process having confined itself for the unit and loaded its
plugin (a warm spare has started Python and imported the guest's code before any unit is known;
what comes with the unit cannot be done ahead).

Each step is timed alone at normal priority, wall clock and CPU, median of the trials, with the
product's own cipher, chunk size and guest pipe size: in this process, in a helper process that
plays both guests and the sender's end, and for the settle-in in a fresh process a trial running
the guest child's own `_settle_in` and plugin loader for the ballast plugin that
bench/migration_latency.py moves. Two ways out of the guest are timed: up a pipe (what an eviction
does, so that the state can go on to the destination while it comes) and into a memfd the node maps.

At each step the floor takes the cheaper way, so it bounds every implementation of these steps; it
is not a design. The carry is the copy whose receiver reads into a reused buffer, not the goal's kept
copy (a receiver that writes each chunk on to the file needs no buffer of the state's size: the
state's fresh memory is paid once, by the write into the page cache); the new guest maps the file
itself; the sync is off the path (it takes no CPU, and a new guest could start while it runs: the
product's waits for it, so that the destination answers only with a durable copy). The steps are
perfectly pipelined (the new guest settles in while the state comes), with no scheduling delay and
no Python between them. The floor is then the longest single step or all the steps' CPU over the
machine's CPUs, whichever is more, plus what a move needs whatever its size: two round trips to a
process over a local socket (ask the guest for its state; hand the new guest its state) and one
loopback TCP round trip (the offer to the peer). Kept copy / floor is the best evict -> running /
kept copy any code could show here; where it is under the goal, no code can meet the goal on this
machine. Beside it, the same without the settle-in (a new guest already confined for this unit).
The product's own evict -> running is `bench/migration_latency.py`'s; run it in the same window.

Run: `.venv/bin/python bench/move_floor.py` (about 25 s; `--sizes 1,10,100` in MiB). Linux only
(memfd, fdatasync).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import mmap
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402
from checkpoint_throughput import _write_all  # noqa: E402
from migration_latency import _RawReceiver  # noqa: E402

from frost_core.guest.confine import readable_paths  # noqa: E402
from frost_core.guest.spawn import widen_pipe  # noqa: E402
from frost_core.wire.framing import HEADER_SIZE, MAX_CHUNK_SIZE  # noqa: E402
from frost_core.wire.security import TAG_SIZE, StreamSession  # noqa: E402

MIB = 1 << 20
SIZES_MIB = (1, 10, 100)
TRIALS = {1: 21, 10: 11, 100: 7}
"""Trials per size (MiB); the figures are medians."""
ROUND_TRIPS = 200
GOALS = {1: 0.5, 10: 0.6, 100: 0.6}
"""Issue 15: evict -> running at least this share of the kept copy's speed."""
PIECE = MIB
"""The size of one write up the guest's pipe (the product writes its state's CBOR pieces)."""
BALLAST = Path(__file__).resolve().parent / "bench_plugins" / "ballast.py"
"""The plugin whose unit bench/migration_latency.py moves: the new guest settles in for it."""
_DONE = struct.Struct("d")
"""The helper's answer to a command: the CPU seconds it spent on it."""


# ---------------------------------------------------------------------------------------------
# The helper process: both guests, and the end of a TCP round trip


def helper(control_fd: int, pipe_fd: int) -> None:
    """Serve commands on the control socket until it closes; each answer carries the CPU spent."""
    control = socket.socket(fileno=control_fd)
    state = b""
    tcp: socket.socket | None = None
    while True:
        command, fds, _, _ = socket.recv_fds(control, 64, 1)
        if not command:
            return
        began = time.process_time()
        verb, _, argument = command.decode().partition(" ")
        if verb == "state":
            state = os.urandom(int(argument))
        elif verb == "pipe":
            view = memoryview(state)
            for at in range(0, len(view), PIECE):
                os.write(pipe_fd, view[at:at + PIECE])
        elif verb == "memfd":
            memfd = os.memfd_create("state", os.MFD_CLOEXEC)
            _write_all(memfd, state)
            socket.send_fds(control, [_DONE.pack(time.process_time() - began)], [memfd])
            os.close(memfd)
            continue
        elif verb == "take":
            with mmap.mmap(fds[0], int(argument), prot=mmap.PROT_READ) as mapped:
                taken = bytes(mapped)  # the plugin's state: fresh memory of its own
            os.close(fds[0])
            del taken
        elif verb == "ping":
            pass
        elif verb == "connect":
            tcp = socket.create_connection(("127.0.0.1", int(argument)))
            tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        elif verb == "tcp" and tcp is not None:
            for _ in range(int(argument)):
                tcp.sendall(tcp.recv(1))
        else:
            raise ValueError(f"the helper was sent {command!r}, which it does not know")
        control.sendall(_DONE.pack(time.process_time() - began))


class Helper:
    """This script's other process, told what to do over a Unix socket."""

    def __init__(self) -> None:
        self.control, theirs = socket.socketpair()
        self.pipe_read, pipe_write = os.pipe()
        widen_pipe(pipe_write)  # as the supervisor widens a guest's pipe
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--helper", str(theirs.fileno()), str(pipe_write)],
            pass_fds=(theirs.fileno(), pipe_write))
        theirs.close()
        os.close(pipe_write)

    def ask(self, command: str) -> float:
        """Send a command and wait for it to be done; the helper's CPU seconds for it."""
        self.send(command)
        return self.answer()

    def send(self, command: str) -> None:
        """Send a command whose work this process joins in before it waits for the `answer`."""
        self.control.sendall(command.encode())

    def answer(self) -> float:
        """Wait for the command sent to be done; the helper's CPU seconds for it."""
        return _DONE.unpack(self.control.recv(_DONE.size, socket.MSG_WAITALL))[0]

    def close(self) -> None:
        self.control.close()
        os.close(self.pipe_read)
        self.process.wait(timeout=10)


def settling(scratch: str, readable: list[str]) -> None:
    """A new guest's process: settle in for the ballast plugin's unit and load it, as the guest child does
    on its GuestStart; print the wall and CPU seconds that took (Python and the guest's code already in)."""
    from frost_core.guest.child import GuestRunner
    from frost_core.guest.priority import forbid_raising
    from frost_core.guest.protocol import GuestStart
    from frost_core.plugin.loader import load_plugin_file

    forbid_raising()  # the spare's own start does this, before any unit
    start = GuestStart(task_id="floor-1.0", plugin_path=str(BALLAST), unit=b"", max_state_bytes=MIB << 8,
                       progress_interval=1.0, resume=True, scratch=scratch, address_space=0, readable=tuple(readable))
    with open(os.devnull, "rb") as inbox, open(os.devnull, "wb") as outbox:
        runner = GuestRunner(inbox, outbox)
        mine, began = time.process_time(), time.perf_counter()
        load_plugin_file(start.plugin_path, runner._settle_in(start))
        print(time.perf_counter() - began, time.process_time() - mine, flush=True)


def new_guest_settles_in(folder: Path, readable: tuple[str, ...]) -> tuple[float, float]:
    """A fresh process settles in and loads the plugin: its own wall and CPU seconds for that."""
    scratch = folder / "scratch"
    scratch.mkdir(exist_ok=True)
    done = subprocess.run([sys.executable, __file__, "--settle", str(scratch), json.dumps(readable)],
                          capture_output=True, text=True, check=True)
    wall, cpu = done.stdout.split()
    return float(wall), float(cpu)


# ---------------------------------------------------------------------------------------------
# The steps, each returning (wall seconds, CPU seconds of both processes)


def out_of_the_guest_by_pipe(helper_: Helper, size: int) -> tuple[float, float]:
    """The guest writes its state up a pipe in pieces; the node reads it into one buffer of its size."""
    kept = memoryview(bytearray(size))
    mine, began = time.process_time(), time.perf_counter()
    helper_.send("pipe")
    have = 0
    while have < size:
        have += os.readv(helper_.pipe_read, [kept[have:have + PIECE]])
    theirs = helper_.answer()
    return time.perf_counter() - began, time.process_time() - mine + theirs


def out_of_the_guest_by_memfd(helper_: Helper, size: int) -> tuple[float, float]:
    """The guest writes its state into a memfd and passes it over; the node maps it (no copy here)."""
    mine, began = time.process_time(), time.perf_counter()
    helper_.send("memfd")
    message, fds, _, _ = socket.recv_fds(helper_.control, _DONE.size, 1, socket.MSG_WAITALL)
    with mmap.mmap(fds[0], size, prot=mmap.PROT_READ):
        pass
    os.close(fds[0])
    return time.perf_counter() - began, time.process_time() - mine + _DONE.unpack(message)[0]


def into_the_new_guest(helper_: Helper, path: Path, size: int) -> tuple[float, float]:
    """The new guest maps the durable file (no copy into a memfd) and copies it into its own bytes."""
    fd = os.open(path, os.O_RDONLY)
    try:
        mine, began = time.process_time(), time.perf_counter()
        socket.send_fds(helper_.control, [f"take {size}".encode()], [fd])
        theirs = helper_.answer()
        return time.perf_counter() - began, time.process_time() - mine + theirs
    finally:
        os.close(fd)


def timed(step) -> tuple[float, float]:
    """Wall and CPU seconds of a step that runs in this process (all its threads)."""
    mine, began = time.process_time(), time.perf_counter()
    step()
    return time.perf_counter() - began, time.process_time() - mine


def seal_all(state: bytes) -> None:
    """Seal the state in the channel's chunks, each frame into the session's reused buffer as the channel sends it."""
    session = StreamSession(b"s" * 32, b"r" * 32)
    view = memoryview(state)
    for at in range(0, len(view), MAX_CHUNK_SIZE):
        session.seal_frame(9, view[at:at + MAX_CHUNK_SIZE])


def sealed_frames(state: bytes) -> list[bytes]:
    """The frames the wire carries for the state (made once per size, outside the timings)."""
    session = StreamSession(b"s" * 32, b"r" * 32)
    view = memoryview(state)
    return [bytes(session.seal_frame(9, view[at:at + MAX_CHUNK_SIZE])) for at in range(0, len(view), MAX_CHUNK_SIZE)]


def open_all(frames: list[bytes]) -> None:
    """Open the frames, each into one reused chunk buffer: the plain text goes on to the file and the hash."""
    session = StreamSession(b"r" * 32, b"s" * 32)
    chunk = memoryview(bytearray(MAX_CHUNK_SIZE))
    for frame in frames:
        length = len(frame) - HEADER_SIZE - TAG_SIZE
        session.open_into(frame[:HEADER_SIZE], memoryview(frame)[HEADER_SIZE:], chunk[:length])


def write_and_sync(path: Path, state: bytes) -> tuple[tuple[float, float], tuple[float, float]]:
    """The state written into a file (the page cache), then that made durable: each step's wall and CPU."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        written = timed(lambda: _write_all(fd, state))
        return written, timed(lambda: os.fdatasync(fd))
    finally:
        os.close(fd)


def round_trips(helper_: Helper) -> tuple[float, float]:
    """Median seconds of one round trip to the helper over its Unix socket, and over loopback TCP."""
    local = []
    for _ in range(ROUND_TRIPS):
        began = time.perf_counter()
        helper_.ask("ping")
        local.append(time.perf_counter() - began)
    with socket.create_server(("127.0.0.1", 0)) as server:
        helper_.send(f"connect {server.getsockname()[1]}")
        connection, _ = server.accept()
        helper_.answer()
    with connection:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        helper_.send(f"tcp {ROUND_TRIPS}")
        tcp = []
        for _ in range(ROUND_TRIPS):
            began = time.perf_counter()
            connection.sendall(b"x")
            connection.recv(1)
            tcp.append(time.perf_counter() - began)
        helper_.answer()
    return statistics.median(local), statistics.median(tcp)


# ---------------------------------------------------------------------------------------------


STEPS = ("out by pipe", "out by memfd", "seal", "copy", "open", "sha256", "write", "sync", "new guest settles in",
         "into new guest")
"""A move's steps. "copy" is the loopback copy whose receiver reads into a reused buffer: the least a
receiver must do, since the state's fresh memory is paid by the write (the page cache)."""
OFF_THE_PATH = ("sync",)
"""Steps no bound counts: the sync takes no CPU and may end after the new guest has started."""


def measure(helper_: Helper, receiver: _RawReceiver, folder: Path, size: int, trials: int,
            readable: tuple[str, ...]) -> dict:
    """Median wall and CPU milliseconds of every step at this size."""
    state = os.urandom(size)
    helper_.ask(f"state {size}")
    path = folder / "checkpoint"
    frames = sealed_frames(state)
    samples: dict[str, list[tuple[float, float]]] = {step: [] for step in (*STEPS, "kept copy")}
    for _ in range(trials):
        samples["out by pipe"].append(out_of_the_guest_by_pipe(helper_, size))
        samples["out by memfd"].append(out_of_the_guest_by_memfd(helper_, size))
        samples["seal"].append(timed(lambda: seal_all(state)))
        samples["kept copy"].append(timed(lambda: receiver.copy(state, keep=True)))
        samples["copy"].append(timed(lambda: receiver.copy(state, keep=False)))
        samples["open"].append(timed(lambda: open_all(frames)))
        samples["sha256"].append(timed(lambda: hashlib.sha256(state).digest()))
        written, synced = write_and_sync(path, state)
        samples["write"].append(written)
        samples["sync"].append(synced)
        samples["new guest settles in"].append(new_guest_settles_in(folder, readable))
        samples["into new guest"].append(into_the_new_guest(helper_, path, size))
    return {step: {"wall_ms": statistics.median(w for w, _ in pairs) * 1000,
                   "cpu_ms": statistics.median(c for _, c in pairs) * 1000}
            for step, pairs in samples.items()}


def floor_ms(steps: dict, fixed_ms: float, cpus: int, *, skip: tuple[str, ...] = ()) -> tuple[float, str, float]:
    """The least evict -> running: perfectly pipelined steps, bounded by the longest of them and by their
    CPU over the machine's CPUs, the state out of the guest the cheaper way; `skip`: steps left out.
    Also the longest step and the CPU bound, to show which of the two holds the floor."""
    floors = []
    for out in ("out by pipe", "out by memfd"):
        chosen = [out] + [s for s in STEPS if not s.startswith("out by") and s not in OFF_THE_PATH + skip]
        longest = max(chosen, key=lambda s: steps[s]["wall_ms"])
        cpu_bound = sum(steps[s]["cpu_ms"] for s in chosen) / cpus
        floors.append((max(steps[longest]["wall_ms"], cpu_bound) + fixed_ms, longest, cpu_bound))
    return min(floors)


def main() -> None:
    if sys.argv[1:2] == ["--helper"]:
        helper(int(sys.argv[2]), int(sys.argv[3]))
        return
    if sys.argv[1:2] == ["--settle"]:
        settling(sys.argv[2], json.loads(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES_MIB), help="state sizes in MiB")
    if not (hasattr(os, "memfd_create") and hasattr(os, "fdatasync")):
        sys.exit("move_floor.py times a memfd hand-out and fdatasync, which this system lacks (they are Linux's)")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    cpus = os.cpu_count() or 1
    helper_, receiver = Helper(), _RawReceiver()
    try:
        local_rtt, tcp_rtt = round_trips(helper_)
        fixed_ms = (2 * local_rtt + tcp_rtt) * 1000
        figures: dict = {"cpus": cpus, "local_round_trip_ms": local_rtt * 1000, "tcp_round_trip_ms": tcp_rtt * 1000,
                         "fixed_ms": fixed_ms}
        step_rows, floor_rows = [], []
        with tempfile.TemporaryDirectory(prefix="frost-floor-", dir=os.environ.get("BENCH_DIR")) as tmp:
            # What the node lets a guest read (confine.py; () where Landlock is missing, as for a node).
            readable = readable_paths((str(BALLAST),), secrets=(tmp, str(Path.home())))
            for size_mib in sizes:
                steps = measure(helper_, receiver, Path(tmp), size_mib * MIB, TRIALS.get(size_mib, 7), readable)
                kept = steps["kept copy"]["wall_ms"]
                floor, longest, cpu_bound = floor_ms(steps, fixed_ms, cpus)
                unsettled, _, _ = floor_ms(steps, fixed_ms, cpus, skip=("new guest settles in",))
                goal = GOALS.get(size_mib)
                figures[f"{size_mib}MiB"] = {
                    "steps": steps, "floor_ms": floor, "longest_step": longest, "cpu_bound_ms": cpu_bound,
                    "best_ratio_to_kept": kept / floor, "floor_ms_without_settle_in": unsettled,
                    "best_ratio_to_kept_without_settle_in": kept / unsettled, "goal_ratio_to_kept": goal,
                }
                step_rows += [[size_mib, step, f["wall_ms"], f["cpu_ms"]] for step, f in steps.items()]
                floor_rows.append([size_mib, kept, f"{longest} {steps[longest]['wall_ms']:.3g}", cpu_bound, floor,
                                   kept / floor, kept / unsettled, goal if goal is not None else "-",
                                   "-" if goal is None else ("yes" if kept / floor >= goal else "NO")])
    finally:
        helper_.close()
    print_table(["MiB", "step", "wall ms", "cpu ms"], step_rows)
    print(f"\nfixed: 2 local round trips ({local_rtt * 1e6:.0f} us each) + 1 loopback TCP round trip "
          f"({tcp_rtt * 1e6:.0f} us) = {fixed_ms:.2f} ms; {cpus} CPUs\n")
    print_table(["MiB", "kept copy ms", "longest step ms", "CPU / CPUs ms", "floor ms", "best ratio",
                 "without the settle-in", "goal", "goal reachable here"], floor_rows)
    write_results("move_floor", {
        "setup": "each step of a move timed alone at normal priority (this process, one helper process, a fresh "
                 "process a trial for the settle-in), medians; floor = max(longest step, all steps' CPU / CPUs) + 2 "
                 "local round trips + 1 loopback TCP round trip, the state out of the guest the cheaper way; best "
                 "ratio = kept copy / floor",
        **figures,
    })


if __name__ == "__main__":
    main()
