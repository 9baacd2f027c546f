"""The state a guest is handed arrives whole and can be changed by no one: real memfds over a real socketpair."""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import socket

import pytest

from frost_core.api.errors import ProtocolError
from frost_core.guest import handoff
from frost_core.plugin.plain import decode_plain, encode_plain

pytestmark = pytest.mark.skipif(not handoff.AVAILABLE, reason="memfd and sealing are Linux's")


@pytest.fixture
def pair():
    node_end, guest_fd = handoff.open_handoff()
    guest_end = socket.socket(fileno=guest_fd)
    yield node_end, guest_end
    node_end.close()
    guest_end.close()


def hand_state(node_end, state: bytes) -> None:
    """What the node does for a starting guest (running.py's `_sealing` and `_hand_over`): seal, send, close its fd."""
    fd = handoff.sealed_state(state)
    try:
        handoff.send_sealed(node_end, fd)
    finally:
        os.close(fd)

def test_the_guest_maps_exactly_the_bytes_the_node_handed_and_decodes_them_from_the_mapping(pair):
    node_end, guest_end = pair
    value = {"blob": os.urandom(3 << 20), "rows": [{"k": k} for k in range(1000)]}
    data = b"\x00" * 7 + encode_plain(value)  # decoded from an offset, as the child skips the envelope's head
    hand_state(node_end, data)
    mapping = handoff.GuestHandoff(guest_end).state(len(data))
    assert mapping[:] == data
    assert decode_plain(mapping, start=7) == value
    mapping.close()  # decoding left no view on it behind


def test_what_the_guest_receives_it_can_neither_write_nor_map_writable_nor_resize_nor_reseal(pair):
    node_end, guest_end = pair
    hand_state(node_end, b"state" * 1000)
    _, (fd,), _, _ = socket.recv_fds(guest_end, 1, 1)  # what plugin code would get if it took the fd itself
    try:
        with pytest.raises(PermissionError):
            os.write(fd, b"evil")
        with pytest.raises(PermissionError):
            os.pwrite(fd, b"evil", 0)
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 1)
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 1 << 20)
        with pytest.raises(PermissionError):
            mmap.mmap(fd, 5000, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        with pytest.raises(PermissionError):
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)  # F_SEAL_SEAL: the set is final
        assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) & handoff.SEALS == handoff.SEALS
        assert os.pread(fd, 10, 0) == b"statestate"  # unchanged
    finally:
        os.close(fd)


def test_the_guest_cannot_talk_back_on_its_end(pair):
    _, guest_end = pair
    with pytest.raises(OSError) as raised:
        guest_end.send(b"a message for the node")
    assert raised.value.errno == errno.EPIPE


def test_a_handed_fd_that_is_not_a_sealed_memfd_of_the_announced_size_is_refused(pair, tmp_path):
    node_end, guest_end = pair
    hand_state(node_end, b"x" * 100)
    with pytest.raises(ProtocolError, match="sealed memfd of 99 bytes"):
        handoff.GuestHandoff(guest_end).state(99)
    plain = tmp_path / "state"
    plain.write_bytes(b"x" * 100)
    fd = os.open(plain, os.O_RDONLY)
    try:
        socket.send_fds(node_end, [b"S"], [fd])
    finally:
        os.close(fd)
    with pytest.raises(ProtocolError):
        handoff.GuestHandoff(guest_end).state(100)


def test_a_sealed_state_is_sealed_before_it_leaves(monkeypatch):
    fd = handoff.sealed_state(b"abc")
    try:
        assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) & handoff.SEALS == handoff.SEALS
    finally:
        os.close(fd)
    real_fcntl = fcntl.fcntl
    # A kernel that took the seals without keeping them (checked, not trusted): nothing leaves, the fd is closed.
    monkeypatch.setattr(handoff.fcntl, "fcntl", lambda fd, op, arg=0: 0 if op == fcntl.F_GET_SEALS else real_fcntl(fd, op, arg))
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError, match="not sealed"):
        handoff.sealed_state(b"abc")
    assert len(os.listdir("/proc/self/fd")) == before


def test_checkpoint_memfds_and_handed_states_share_the_socket_each_told_by_its_mark(pair):
    node_end, guest_end = pair
    guest = handoff.GuestHandoff(guest_end)
    assert guest.newest_outbox() is None  # nothing sent: it does not wait
    first, second = handoff.open_outbox(), handoff.open_outbox()
    try:
        handoff.hand_outbox(node_end, first)  # a unit's, never used (its request crossed its result)
        hand_state(node_end, b"saved" * 100)  # the next unit's saved state
        mapping = guest.state(500)  # takes the state, keeps the checkpoint memfd sent before it
        assert mapping[:5] == b"saved"
        mapping.close()
        handoff.hand_outbox(node_end, second)
        outbox = guest.newest_outbox()
        assert os.path.samestat(os.fstat(outbox), os.fstat(second))  # the newest; the older one closed
        assert handoff.fill_outbox(outbox, [b"a" * 3000, b"b" * 10]) == 3010
        assert handoff.fill_outbox(outbox, [b"c" * 5]) == 5  # what the bigger state left is cut off
        assert os.pread(second, 100, 0) == b"ccccc"  # the node reads what the guest wrote
        hand_state(node_end, b"x" * 10)
        with pytest.raises(ProtocolError, match="a handed state came where a checkpoint memfd belongs"):
            guest.newest_outbox()
    finally:
        os.close(first)
        os.close(second)
        if guest.outbox is not None:
            os.close(guest.outbox)
