"""A short busy loop at guest priority in its own process: what a guest would get here now (FROST 5.1).

The probe is *scheduled* by the node at normal priority but *runs* at guest priority, in
a subprocess, so it never blocks the node's loop and is preempted exactly like a guest.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import trio

PROBE_CHILD = Path(__file__).with_name("probe_child.py")


def _probe_command(seconds: float) -> list[str]:
    if not 0 < seconds <= 10:
        raise ValueError(f"a probe lasts between 0 and 10 seconds, not {seconds}")
    return [sys.executable, str(PROBE_CHILD), repr(seconds)]


def _parse(output: bytes) -> float:
    cpu, wall = (float(x) for x in output.split())
    return min(cpu / wall, 1.0) if wall > 0 else 0.0


async def probe_share(seconds: float = 0.1) -> float:
    """Share of one CPU (0..1) a guest-priority process obtained over `seconds`; never blocks trio."""
    done = await trio.run_process(_probe_command(seconds), capture_stdout=True, start_new_session=True)
    return _parse(done.stdout)


def probe_share_blocking(seconds: float = 0.1) -> float:
    """The same, for command-line calibration outside trio."""
    done = subprocess.run(_probe_command(seconds), capture_output=True, check=True, start_new_session=True)
    return _parse(done.stdout)
