"""CPU share of a guest against CPU hogs started in another session, per priority recipe.

Question: how much of a core does a busy guest take from an owner whose CPU-bound jobs run in
their own terminal session? Goal: <= 5 % for the guest recipe. Measured in the same run:
plain nice 19 (the trap: autogroups rank sessions first), own session + nice 19, and the full
recipe of `frost_core.guest.priority.enter_guest_priority` (own session, autogroup 19, nice 19,
SCHED_IDLE, locked). One hog per core, each in its own session at normal priority.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402

SECONDS = float(os.environ.get("SHARE_SECONDS", "3"))
SPIN = "import time\nwhile True: pass\n"
RECIPES = {
    "plain nice 19 (same session)": ("import os; os.nice(19)\n" + SPIN, False),
    "own session + nice 19": ("import os; os.nice(19)\n" + SPIN, True),
    "guest recipe (enter_guest_priority)": (
        "from frost_core.guest.priority import enter_guest_priority; enter_guest_priority()\n" + SPIN, True,
    ),
}


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def measure(code: str, own_session: bool) -> float:
    guest = subprocess.Popen([sys.executable, "-c", code], start_new_session=own_session)
    hogs = [subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True) for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(1.0)  # let the interpreters start and the guest lower itself
        process = psutil.Process(guest.pid)
        cpu_before, wall_before = cpu_seconds(process), time.monotonic()
        time.sleep(SECONDS)
        return (cpu_seconds(process) - cpu_before) / (time.monotonic() - wall_before)
    finally:
        for child in (guest, *hogs):
            child.kill()
            child.wait()


def main() -> None:
    rows, figures = [], {}
    for name, (code, own_session) in RECIPES.items():
        share = measure(code, own_session)
        rows.append([name, f"{share:.1%}", "yes" if share <= 0.05 else "no"])
        figures[name] = {"share_of_one_core": share}
    print_table(["guest priority recipe", "CPU share vs hogs", "<= 5 %"], rows)
    write_results("guest_priority_share", figures)


if __name__ == "__main__":
    main()
