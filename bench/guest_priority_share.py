"""CPU share of a guest against CPU hogs started in another session, per priority recipe.

Question: how much of a core does a busy guest take from an owner whose CPU-bound jobs run in
their own terminal session? Goal: <= 5 % for the guest recipe. Measured in the same run:
plain nice 19 (the trap: autogroups rank sessions first), own session + nice 19, and the full
recipe of `frost_core.guest.priority.enter_guest_priority` (own session, autogroup 19, nice 19,
SCHED_IDLE, locked). One hog per core, each in its own session at normal priority.

The cross-cgroup cases (cgroup v1 or v2 with a writable cpu hierarchy, as root): the hogs in a
cgroup of their own at the default weight, as systemd gives each desktop app a scope, and the
guest (full recipe) either in another cgroup of default weight (the node's service: the plain
recipe, whose autogroup and SCHED_IDLE rank it only inside that cgroup) or in the guests'
cgroup that `frost_core.guest.cgroups` makes (a parent of nice-19 weight at the top).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from frost_core.guest.cgroups import current_mounts, open_guest_cgroups, remove_folder

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


def measure(code: str, own_session: bool, place=None) -> float:
    """The guest's CPU share against one hog per core; `place(guest_pid, hog_pids)` puts them in cgroups."""
    guest = subprocess.Popen([sys.executable, "-c", code], start_new_session=own_session)
    hogs = [subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True) for _ in range(os.cpu_count() or 1)]
    try:
        if place is not None:
            place(guest.pid, [hog.pid for hog in hogs])
        time.sleep(1.0)  # let the interpreters start and the guest lower itself
        process = psutil.Process(guest.pid)
        cpu_before, wall_before = cpu_seconds(process), time.monotonic()
        time.sleep(SECONDS)
        return (cpu_seconds(process) - cpu_before) / (time.monotonic() - wall_before)
    finally:
        for child in (guest, *hogs):
            child.kill()
            child.wait()


def measure_across_cgroups(name: str) -> float | None:
    """The full recipe against hogs in another cgroup; None where no cpu hierarchy is writable here."""
    top = current_mounts().v1_roots.get("cpu")
    if top is None or not os.access(top, os.W_OK):
        return None
    made = [top / f"bench-{role}-{os.getpid()}" for role in ("node", "desk")]
    for folder in made:
        folder.mkdir()
    guests = open_guest_cgroups() if "guests'" in name else None
    try:
        def place(guest: int, hogs: list[int]) -> None:
            if guests is not None:
                cgroup = guests.guest("bench", memory_bytes=1 << 30, pids_max=64)
                assert cgroup is not None
                cgroup.add(guest)
            else:
                (made[0] / "cgroup.procs").write_text(str(guest))
            for hog in hogs:
                (made[1] / "cgroup.procs").write_text(str(hog))

        return measure(RECIPES["guest recipe (enter_guest_priority)"][0], True, place)
    finally:
        if guests is not None:
            guests.close()
        for folder in made:
            for pid in (folder / "cgroup.procs").read_text().split():
                (top / "cgroup.procs").write_text(pid)  # killed already; a zombie may linger a moment
            remove_folder(folder)  # once the kernel has let its killed processes go


CROSS_CGROUP = ("recipe, node's cgroup vs hogs' cgroup", "recipe in the guests' cgroup vs hogs' cgroup")


def main() -> None:
    rows, figures = [], {}
    for name, (code, own_session) in RECIPES.items():
        share = measure(code, own_session)
        rows.append([name, f"{share:.1%}", "yes" if share <= 0.05 else "no"])
        figures[name] = {"share_of_one_core": share}
    for name in CROSS_CGROUP:
        crossed = measure_across_cgroups(name)
        if crossed is None:
            rows.append([name, "no writable cpu cgroup here", "-"])
            continue
        rows.append([name, f"{crossed:.1%}", "yes" if crossed <= 0.05 else "no"])
        figures[name] = {"share_of_one_core": crossed}
    print_table(["guest priority recipe", "CPU share vs hogs", "<= 5 %"], rows)
    write_results("guest_priority_share", figures)


if __name__ == "__main__":
    main()
