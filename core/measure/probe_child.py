"""The probe's child process: lower itself to guest priority, spin, print CPU and wall seconds.

Run as a script path (not `-m`), so it imports nothing of the node before lowering itself.
"""

from __future__ import annotations

import os
import sys
import time


def lower_to_guest_priority() -> None:
    """Use the guest runtime's function when present; else the same steps, each allowed to fail."""
    try:
        from frost_core.guest.priority import lower_priority
    except ImportError:
        _lower_fallback()
    else:
        lower_priority()


def _lower_fallback() -> None:
    try:
        with open("/proc/self/autogroup", "w") as handle:
            handle.write("19")
    except OSError:
        pass    # not Linux, or no autogroup: nice and SCHED_IDLE still apply
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 19)
    except OSError:
        pass    # some platforms refuse; the reading is then an upper bound
    if hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except OSError:
            pass    # unprivileged containers may refuse SCHED_IDLE


def spin(seconds: float) -> tuple[float, float]:
    """Busy-loop for `seconds` of wall time; return (CPU seconds obtained, wall seconds)."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    end = wall0 + seconds
    while time.perf_counter() < end:
        for _ in range(2000):
            pass
    return time.process_time() - cpu0, time.perf_counter() - wall0


if __name__ == "__main__":
    lower_to_guest_priority()
    cpu, wall = spin(float(sys.argv[1]))
    print(cpu, wall)
