"""A starting guest's saved state handed over as a sealed memfd, so it never crosses the pipe.

Read from a 1 MiB pipe, a 10 MiB state costs the new guest ten wake-ups at SCHED_IDLE and a
copy; on a busy machine that was most of a move's evict -> running time (150-800 ms at load
3-10). Instead the node copies the state once into a memfd, seals it (no one, the node
included, may write, shrink or grow it again, nor lift the seals) and sends the fd over a unix
socketpair the guest got at spawn; the guest maps it read-only and decodes from the mapping.
The same socket carries the other way's memfd too (since issue 15): a checkpoint's state goes
out through a memfd the node makes for each unit and sends on its first checkpoint request that
asks for it (`GuestCheckpointRequest.hash_prefix`). The guest writes the enveloped state into
it and answers on the pipe with the size and the hash; the node copies it to disk kernel to
kernel (`CheckpointStore.commit_handed`), so the bytes never cross the pipe nor the node's memory.
It is not sealed (the guest writes it every time) and not sealable (so no guest can stop the node
from emptying it); the guest may change or shrink it at any moment, which ruins only its own
checkpoint (see `commit_handed`). Still, the node never reads from its end of the socket.

Linux only (memfd, sealing): elsewhere, or when any step fails, the state goes through the pipe.
"""

from __future__ import annotations

import array
import fcntl
import mmap
import os
import socket

from frost_core.api.errors import ProtocolError
from frost_core.wire.pipe import write_pieces

SEALS = getattr(fcntl, "F_SEAL_WRITE", 0) | getattr(fcntl, "F_SEAL_SHRINK", 0) | getattr(
    fcntl, "F_SEAL_GROW", 0) | getattr(fcntl, "F_SEAL_SEAL", 0)
"""What a handed state's memfd carries before it is sent: it can never change again."""
AVAILABLE = hasattr(os, "memfd_create") and hasattr(socket, "send_fds") and hasattr(fcntl, "F_ADD_SEALS")
"""Whether this OS can hand a state over at all (Linux): elsewhere guests get no hand-off socket."""
_MARK = b"S"
_OUTBOX_MARK = b"O"
KEEP_OUTBOX_BYTES = 16 << 20
"""A checkpoint memfd keeps its pages for the next checkpoint up to this size (a 10 MiB state is written into
kept pages in 1.3 ms, into fresh ones in 4.5); past it the node empties it after each commit (the pages are
charged to the guest, which must not hold a big state twice) and the guest announces the next state before
it writes it, so the node copies while it fills."""
_FD_SIZE = array.array("i").itemsize


def open_handoff() -> tuple[socket.socket, int] | None:
    """The node's end of a new hand-off socketpair and the guest's end as a raw fd to inherit; None where
    there is no memfd. The node's end only sends (it is shut for reading) and never blocks."""
    if not AVAILABLE:
        return None
    node_end, guest_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    node_end.shutdown(socket.SHUT_RD)
    node_end.setblocking(False)
    return node_end, guest_end.detach()


def sealed_state(state: bytes) -> int:
    """A memfd holding `state`, sealed and checked to be so; OSError if any step fails.

    One copy, into the memfd's pages (which the guest then maps where they are)."""
    fd = os.memfd_create("frost-state", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(state)
        while view:
            view = view[os.write(fd, view):]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
        if fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS != SEALS or os.fstat(fd).st_size != len(state):
            raise OSError(f"the state's memfd is not sealed as asked (seals {fcntl.fcntl(fd, fcntl.F_GET_SEALS):#x})")
    except BaseException:
        os.close(fd)
        raise
    return fd


def send_sealed(node_end: socket.socket, fd: int) -> None:
    """Send the sealed state memfd `fd` (from `sealed_state`) over `node_end`; the caller still closes its `fd`."""
    socket.send_fds(node_end, [_MARK], [fd])


def open_outbox() -> int:
    """The node's side: a new memfd for a unit's checkpoints to come out through (not sealable); OSError if none."""
    return os.memfd_create("frost-checkpoint", os.MFD_CLOEXEC)


def hand_outbox(node_end: socket.socket, fd: int) -> None:
    """Send the checkpoint memfd `fd` to the guest (which keeps the newest it got); OSError if it cannot go."""
    socket.send_fds(node_end, [_OUTBOX_MARK], [fd])


def fill_outbox(fd: int, pieces: list[bytes]) -> int:
    """The guest's side: put `pieces`, one after another, at the start of its checkpoint memfd, and cut off
    what an older, bigger state left behind; their size (OSError if a step fails).

    The pages stay where they were (no truncation first): a small state's next checkpoint
    faults none in. The node empties the memfd after a big one."""
    os.lseek(fd, 0, os.SEEK_SET)
    write_pieces(fd, pieces)
    size = os.lseek(fd, 0, os.SEEK_CUR)
    os.ftruncate(fd, size)
    return size


class GuestHandoff:
    """The guest's end of the hand-off socket: the saved state handed in, the newest checkpoint memfd to hand out.

    Both come on the one socket, in the order the node sent them; each is told by its mark."""

    def __init__(self, guest_end: socket.socket) -> None:
        self.guest_end = guest_end
        self.outbox: int | None = None
        """The checkpoint memfd the node sent last; None before the first."""

    def state(self, size: int) -> mmap.mmap:
        """The memfd the node sent with a unit's saved state, mapped read-only (its pages faulted in at once),
        its fd closed; a checkpoint memfd sent before it is kept.

        ProtocolError unless it is one sealed memfd of exactly `size` bytes."""
        received = self._receive(0)
        while received is not None and received[0] == _OUTBOX_MARK:
            self._keep(received[1])
            received = self._receive(0)
        assert received is not None  # (a receive that waits returns one)
        mark, fd = received
        try:
            if mark != _MARK or os.fstat(fd).st_size != size or fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS != SEALS:
                raise ProtocolError(f"the handed state is not a sealed memfd of {size} bytes")
            return mmap.mmap(fd, size, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0), prot=mmap.PROT_READ)
        except OSError as error:
            raise ProtocolError(f"cannot map the handed state: {error}") from error
        finally:
            os.close(fd)

    def newest_outbox(self) -> int | None:
        """The checkpoint memfd the node sent last (it sends one before the request that asks for it, so
        this never waits); None if none came."""
        while (received := self._receive(socket.MSG_DONTWAIT)) is not None:
            mark, fd = received
            if mark != _OUTBOX_MARK:
                os.close(fd)
                raise ProtocolError("a handed state came where a checkpoint memfd belongs")
            self._keep(fd)
        return self.outbox

    def _keep(self, fd: int) -> None:
        if self.outbox is not None:
            os.close(self.outbox)
        self.outbox = fd

    def _receive(self, flags: int) -> tuple[bytes, int] | None:
        """The next mark and fd; None if `flags` say not to wait and nothing is there."""
        try:  # (not socket.recv_fds: it drops `flags`, Python 3.11-3.12)
            mark, ancillary, _, _ = self.guest_end.recvmsg(len(_MARK), socket.CMSG_SPACE(_FD_SIZE), flags)
        except BlockingIOError:
            return None
        except OSError as error:
            raise ProtocolError(f"the hand-off socket failed: {error}") from error
        fds = array.array("i")
        for level, kind, data in ancillary:
            if (level, kind) == (socket.SOL_SOCKET, socket.SCM_RIGHTS):
                fds.frombytes(data[: len(data) - len(data) % _FD_SIZE])
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise ProtocolError(f"expected one memfd on the hand-off socket, got {len(fds)} fds")
        return mark, fds[0]

