"""A trio channel's pipe read blocking by one thread for a while, so a guest's answer wakes that thread, not the loop."""

from __future__ import annotations

import os
import select
import time

MID_FRAME_GRACE = 1.0
"""How long, once the lender wants its pipe back, a frame begun may take to come whole (a guest writes a frame
in one go): past it the pipe is left `torn`, so a writer that stops mid-frame cannot hold the lender."""


class LentInterrupted(Exception):
    """The lender wanted its pipe back: the thread waited between two frames, or past MID_FRAME_GRACE in one."""


class LentPipe:
    """A non-blocking pipe read as a blocking file (`wire.pipe.read_frame`, `read_bulk_data`), the bytes its
    channel had buffered first. `between_frames` marks where `interrupt` may end a wait; elsewhere a wait
    goes on until the frame's bytes come, the pipe closes or MID_FRAME_GRACE passes (`torn` then: the
    channel is left mid-frame)."""

    def __init__(self, fd: int, buffered: bytes) -> None:
        self._fd = fd
        self._prefix = memoryview(buffered)
        self._wake_read, self._wake_write = os.pipe()
        self._interruptible = False
        self._interrupted = False
        self._grace_ends = 0.0
        self.torn = False

    def between_frames(self) -> None:
        """The next read starts a frame: `interrupt` may end its wait."""
        self._interruptible = True

    def interrupt(self) -> None:
        """Ask the thread to give the pipe back (from any thread)."""
        try:
            os.write(self._wake_write, b"x")
        except OSError:
            pass  # closed: the thread is done

    def unread(self, data: bytes) -> None:
        """Put `data` back in front: the lender reads it again."""
        self._prefix = memoryview(data + self._prefix.tobytes())

    def rest(self) -> bytes:
        """What was buffered and not read: the lender's again."""
        rest, self._prefix = self._prefix.tobytes(), memoryview(b"")
        return rest

    def close(self) -> None:
        os.close(self._wake_read)
        os.close(self._wake_write)

    def read(self, size: int) -> bytes:
        view = memoryview(bytearray(size))
        return view[: self.readinto(view)].tobytes()

    def readinto(self, view: memoryview) -> int:
        if self._prefix:
            count = min(len(view), len(self._prefix))
            view[:count] = self._prefix[:count]
            self._prefix = self._prefix[count:]
        else:
            while True:
                try:
                    count = os.readv(self._fd, [view])
                    break
                except BlockingIOError:
                    self._wait()
        self._interruptible = False
        return count

    def _wait(self) -> None:
        """Until the pipe has bytes or closes; LentInterrupted if asked to stop between two frames, or when
        MID_FRAME_GRACE has passed since in one."""
        while True:
            if self._interrupted and self._interruptible:
                raise LentInterrupted()
            poller = select.poll()
            poller.register(self._fd, select.POLLIN)
            timeout = None
            if self._interrupted:
                timeout = max(0, round((self._grace_ends - time.monotonic()) * 1000))
            else:
                poller.register(self._wake_read, select.POLLIN)
            ready = {fd for fd, _ in poller.poll(timeout)}
            if self._fd in ready:
                return
            if self._interrupted:
                self.torn = True
                raise LentInterrupted()
            os.read(self._wake_read, 64)
            self._interrupted = True  # mid-frame: its bytes first (the guest writes a frame whole)
            self._grace_ends = time.monotonic() + MID_FRAME_GRACE
