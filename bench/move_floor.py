"""The fastest an eviction could move a state on this machine, against the raw copy that keeps the bytes.

Question: issue 15's move goals (evict -> running >= 0.5 of the kept copy at 1 MiB, >= 0.6 at 10 and
100 MiB) are judged on one 2-CPU machine that holds both nodes and both guests. What is the least
time any implementation could take here, given what a move must do, and is the goal above it?

A move must, at least: get the state out of the guest's process (guest code runs in its own
confined process), seal it for the wire (AES-OCB3, as the cluster's channel does), carry it over a
loopback socket, open it, hash it (the checkpoint's SHA-256), write it to a file and make that
durable (the source drops its copy only then), and get it into a new guest process as the `bytes`
the plugin API hands a state in. Each step is timed alone
here at normal priority, wall clock and CPU (this process and a helper process that plays both
guests and the sender's side), median of the trials, with the product's own cipher and chunk size.
Two ways out of the guest are timed: up a pipe (what an eviction does, so that the state can go on
to the destination while it comes) and into a memfd the node maps (the least copying there is).
The carry is the copy whose receiver reads into a reused buffer, not the goal's kept copy: a
receiver that writes each chunk on to the file needs no buffer of the state's size, and the state's
fresh memory is paid once, by the durable write (the page cache). At each step the floor takes the
cheaper way, so it is a bound no implementation of these steps can beat, not a design. So the
sync is off the path: it takes no CPU, and a new guest could start while it runs (the product's
guest waits for it, so that the destination answers only with a durable copy).

The floor assumes perfect pipelining, no scheduling delay and no Python between the steps: each
byte goes through every step as soon as the step before lets it. It is then bounded below by the
longest single step and by all the steps' CPU divided over
the machine's CPUs, plus the fixed part a move needs whatever its size: two round trips to a
process over a local socket (ask the guest for its state; hand the new guest its state and see its
first step) and one loopback TCP round trip (the offer to the peer). The ratio kept copy / floor
is the best evict -> running / kept copy any code could show here; where it is under the goal, no
code can meet the goal on this machine. The product's own evict -> running is
`bench/migration_latency.py`'s; run it in the same window to put the two side by side.

Run: `.venv/bin/python bench/move_floor.py` (about a minute; `--sizes 1,10,100` in MiB).
"""

from __future__ import annotations

import argparse
import hashlib
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
from migration_latency import _RawReceiver  # noqa: E402

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
        control.sendall(_DONE.pack(time.process_time() - began))


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Helper:
    """This script's other process, told what to do over a Unix socket."""

    def __init__(self) -> None:
        self.control, theirs = socket.socketpair()
        self.pipe_read, pipe_write = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--helper", str(theirs.fileno()), str(pipe_write)],
            pass_fds=(theirs.fileno(), pipe_write))
        theirs.close()
        os.close(pipe_write)

    def ask(self, command: str) -> float:
        """Send a command and wait for it to be done; the helper's CPU seconds for it."""
        self.control.sendall(command.encode())
        return self._answer()

    def _answer(self) -> float:
        return _DONE.unpack(self.control.recv(_DONE.size, socket.MSG_WAITALL))[0]

    def close(self) -> None:
        self.control.close()
        os.close(self.pipe_read)
        self.process.wait(timeout=10)


# ---------------------------------------------------------------------------------------------
# The steps, each returning (wall seconds, CPU seconds of both processes)


def out_of_the_guest_by_pipe(helper_: Helper, size: int) -> tuple[float, float]:
    """The guest writes its state up a pipe in pieces; the node reads it into one buffer of its size."""
    kept = memoryview(bytearray(size))
    mine, began = time.process_time(), time.perf_counter()
    helper_.control.sendall(b"pipe")
    have = 0
    while have < size:
        have += os.readv(helper_.pipe_read, [kept[have:have + PIECE]])
    theirs = helper_._answer()
    return time.perf_counter() - began, time.process_time() - mine + theirs


def out_of_the_guest_by_memfd(helper_: Helper, size: int) -> tuple[float, float]:
    """The guest writes its state into a memfd and passes it over; the node maps it (no copy here)."""
    mine, began = time.process_time(), time.perf_counter()
    helper_.control.sendall(b"memfd")
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
        theirs = helper_._answer()
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
        helper_.control.sendall(f"connect {server.getsockname()[1]}".encode())
        connection, _ = server.accept()
        helper_._answer()
    with connection:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        helper_.control.sendall(f"tcp {ROUND_TRIPS}".encode())
        tcp = []
        for _ in range(ROUND_TRIPS):
            began = time.perf_counter()
            connection.sendall(b"x")
            connection.recv(1)
            tcp.append(time.perf_counter() - began)
        helper_._answer()
    return statistics.median(local), statistics.median(tcp)


# ---------------------------------------------------------------------------------------------


STEPS = ("out by pipe", "out by memfd", "seal", "copy", "open", "sha256", "write", "sync", "into new guest")
"""A move's steps. "copy" is the loopback copy whose receiver reads into a reused buffer: the least a
receiver must do, since the state's fresh memory is paid by the write (the page cache)."""
OFF_THE_PATH = ("sync",)
"""Steps no bound counts: the sync takes no CPU and may end after the new guest has started."""


def measure(helper_: Helper, receiver: _RawReceiver, folder: Path, size: int, trials: int) -> dict:
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
        samples["into new guest"].append(into_the_new_guest(helper_, path, size))
    return {step: {"wall_ms": statistics.median(w for w, _ in pairs) * 1000,
                   "cpu_ms": statistics.median(c for _, c in pairs) * 1000}
            for step, pairs in samples.items()}


def floor_ms(steps: dict, fixed_ms: float, out: str, cpus: int) -> tuple[float, str, float]:
    """The least evict -> running with the state leaving the guest by `out`: perfectly pipelined steps,
    bounded by the longest of them and by their CPU over the machine's CPUs. Also the longest step and
    the CPU bound, to show which of the two holds the floor."""
    chosen = [out] + [s for s in STEPS if not s.startswith("out by") and s not in OFF_THE_PATH]
    longest = max(chosen, key=lambda s: steps[s]["wall_ms"])
    cpu_bound = sum(steps[s]["cpu_ms"] for s in chosen) / cpus
    return max(steps[longest]["wall_ms"], cpu_bound) + fixed_ms, longest, cpu_bound


def main() -> None:
    if sys.argv[1:2] == ["--helper"]:
        helper(int(sys.argv[2]), int(sys.argv[3]))
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
            for size_mib in sizes:
                steps = measure(helper_, receiver, Path(tmp), size_mib * MIB, TRIALS.get(size_mib, 7))
                kept = steps["kept copy"]["wall_ms"]
                by_memfd, longest, cpu_bound = floor_ms(steps, fixed_ms, "out by memfd", cpus)
                by_pipe, _, _ = floor_ms(steps, fixed_ms, "out by pipe", cpus)
                goal = GOALS.get(size_mib)
                figures[f"{size_mib}MiB"] = {
                    "steps": steps, "floor_ms_out_by_memfd": by_memfd, "floor_ms_out_by_pipe": by_pipe,
                    "longest_step": longest, "cpu_bound_ms_out_by_memfd": cpu_bound,
                    "best_ratio_to_kept": kept / by_memfd, "best_ratio_to_kept_out_by_pipe": kept / by_pipe,
                    "goal_ratio_to_kept": goal,
                }
                step_rows += [[size_mib, step, f["wall_ms"], f["cpu_ms"]] for step, f in steps.items()]
                floor_rows.append([size_mib, kept, f"{longest} {steps[longest]['wall_ms']:.3g}", cpu_bound,
                                   by_memfd, kept / by_memfd, by_pipe, kept / by_pipe,
                                   goal if goal is not None else "-",
                                   "-" if goal is None else ("yes" if kept / by_memfd >= goal else "NO")])
    finally:
        helper_.close()
    print_table(["MiB", "step", "wall ms", "cpu ms"], step_rows)
    print(f"\nfixed: 2 local round trips ({local_rtt * 1e6:.0f} us) + 1 loopback TCP round trip "
          f"({tcp_rtt * 1e6:.0f} us) = {fixed_ms:.2f} ms; {cpus} CPUs\n")
    print_table(["MiB", "kept copy ms", "longest step ms", "CPU / CPUs ms", "floor ms (memfd out)", "best ratio",
                 "floor ms (pipe out)", "best ratio", "goal", "goal reachable here"], floor_rows)
    write_results("move_floor", {
        "setup": "each step of a move timed alone at normal priority (this process and one helper process), "
                 "medians; floor = max(longest step, all steps' CPU / CPUs) + 2 local round trips + 1 loopback TCP "
                 "round trip; best ratio = kept copy / floor",
        **figures,
    })


if __name__ == "__main__":
    main()
