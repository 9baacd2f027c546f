"""When the terminal of a UI with an embedded node goes away: the window closed or the ssh link dropped (SIGHUP), or
the desktop session ends (SIGTERM).

Python's default for both is to die at once, and an embedded node's guests died with it: their work since their last
checkpoints was lost, and their masters learned of it only from the failure detector. The UI instead stops its node
as the service does on a stop (`node.stop_handoff`): the guests checkpoint and go on to peers, then the node leaves.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable

HANG_UP_SIGNALS = (signal.SIGHUP, signal.SIGTERM)

_kept_open: list[int] = []   # the write end of the pipe the input reads after a hang-up: never closed, never written


def on_hang_up(callback: Callable[[], None]) -> bool:
    """Call `callback` on the running asyncio loop at SIGHUP or SIGTERM; False where signals cannot be watched so."""
    loop = asyncio.get_running_loop()
    try:
        for signum in HANG_UP_SIGNALS:
            loop.add_signal_handler(signum, callback)
    except (NotImplementedError, RuntimeError, ValueError):   # (not the main thread, or no such signals here)
        return False
    return True


def detach_from_terminal() -> None:
    """Point the UI's terminal descriptors away from the terminal that is gone: output and errors to /dev/null (a
    write to a hung-up terminal fails), input to a pipe that nothing writes to (a read of the hung-up terminal fails,
    which ends a Textual app at once, and /dev/null is always readable: its input thread would spin)."""
    nowhere = os.open(os.devnull, os.O_WRONLY)
    silent, kept = os.pipe()
    _kept_open.append(kept)
    for target, source in ((0, silent), (1, nowhere), (2, nowhere)):
        os.dup2(source, target)
    os.close(nowhere)
    os.close(silent)
