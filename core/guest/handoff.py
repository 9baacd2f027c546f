"""A starting guest's saved state handed over as a sealed memfd, so it never crosses the pipe.

Read from a 1 MiB pipe, a 10 MiB state costs the new guest ten wake-ups at SCHED_IDLE and a
copy; on a busy machine that was most of a move's evict -> running time (150-800 ms at load
3-10). Instead the node copies the state once into a memfd, seals it (no one, the node
included, may write, shrink or grow it again, nor lift the seals) and sends the fd over a unix
socketpair the guest got at spawn; the guest maps it read-only and decodes from the mapping.
A guest gets nothing else through that socket: the node never reads from its end.

Linux only (memfd, sealing): elsewhere, or when any step fails, the state goes through the pipe.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import socket

from frost_core.api.errors import ProtocolError

SEALS = getattr(fcntl, "F_SEAL_WRITE", 0) | getattr(fcntl, "F_SEAL_SHRINK", 0) | getattr(
    fcntl, "F_SEAL_GROW", 0) | getattr(fcntl, "F_SEAL_SEAL", 0)
"""What a handed state's memfd carries before it is sent: it can never change again."""
AVAILABLE = hasattr(os, "memfd_create") and hasattr(socket, "send_fds") and hasattr(fcntl, "F_ADD_SEALS")
"""Whether this OS can hand a state over at all (Linux): elsewhere guests get no hand-off socket."""
_MARK = b"S"


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


def hand_state(node_end: socket.socket, state: bytes) -> None:
    """Put `state` in a sealed memfd and send it over `node_end`; OSError (and nothing sent) if any step fails."""
    fd = sealed_state(state)
    try:
        socket.send_fds(node_end, [_MARK], [fd])
    finally:
        os.close(fd)  # the guest's copy of the fd (in flight, then received) keeps it alive


def receive_state(guest_end: socket.socket, size: int) -> mmap.mmap:
    """The guest's side: the memfd the node sent, mapped read-only (its pages faulted in at once), its fd closed.

    ProtocolError unless it is one sealed memfd of exactly `size` bytes."""
    try:
        _, fds, _, _ = socket.recv_fds(guest_end, len(_MARK), 1)
    except OSError as error:
        raise ProtocolError(f"the hand-off socket failed: {error}") from error
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise ProtocolError(f"expected the state's memfd on the hand-off socket, got {len(fds)} fds")
    (fd,) = fds
    try:
        if os.fstat(fd).st_size != size or fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS != SEALS:
            raise ProtocolError(f"the handed state is not a sealed memfd of {size} bytes")
        return mmap.mmap(fd, size, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0), prot=mmap.PROT_READ)
    except OSError as error:
        raise ProtocolError(f"cannot map the handed state: {error}") from error
    finally:
        os.close(fd)
