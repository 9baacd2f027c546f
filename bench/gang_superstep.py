"""Superstep overhead of a gang whose p members run in real guests, against the same gang in one process.

For p = 2, 3, 4 and two plates of the bundled heat diffusion (a small one, where a superstep is
almost all overhead, and a larger one), it times:

- `one process`: `run_gang_locally(checkpoint_every=None)`, every member in turn in this process;
- `guests`: p guest processes (`guest.gang_member.open_member`: the sandbox, cgroups and the
  lowest priority a unit gets) stepped by a barrier loop here, as the coordinator will: each
  superstep sends every member its inbox, waits for every answer and delivers the messages.
  Starting the guests up to the end of superstep 0 is timed apart (`start s`), and so is one
  barrier checkpoint of all p after it.

Per superstep: wall time in one process, in guests, and their difference (the overhead: pipe
round trips, CBOR of inboxes and answers, the barrier; the guests also compute in parallel, so
on a large plate the difference can be negative). Then CPU time per superstep: this process's
in one process, against the members' (their guests' CPU) plus the barrier loop's here, and
the difference per member: what running in a guest costs in work, whatever the load. Guests run at SCHED_IDLE: on a loaded machine
they wait for idle CPU, which is the point of them, so the load average is written with the
figures. Runs in well under a minute on an idle 2-core machine (`--quick`: p = 2 only).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import print_table, write_results  # noqa: E402
from frost_core.guest.containment import Containment  # noqa: E402
from frost_core.guest.gang_member import MemberGuest, MemberSpec, open_member  # noqa: E402
from frost_core.guest.views import GuestSettings  # noqa: E402
from frost_core.plugin.gang import Inbox, check_agreement, deliver, run_gang_locally  # noqa: E402
from frost_core.plugin.loader import load_plugin_file  # noqa: E402

HEAT = Path(__file__).resolve().parents[1] / "plugins" / "heat_diffusion.py"
PLATES = {"small": (24, 24, 40), "large": (192, 192, 12)}  # height, width, iterations (= supersteps - 1)
MEMORY = 64 * 1024 * 1024


async def step_all(members: list[MemberGuest], inboxes: list[Inbox]) -> list:
    """One superstep of every member at once: their answers by rank."""
    answers: list = [None] * len(members)

    async def one(rank: int) -> None:
        answers[rank] = await members[rank].step(inboxes[rank])

    async with trio.open_nursery() as nursery:
        for rank in range(len(members)):
            nursery.start_soon(one, rank)
    return answers


async def in_guests(params: dict, p: int, folder: Path) -> dict:
    settings = GuestSettings()
    containment = Containment(data_dir=folder, input_roots=(), settings=settings)
    try:
        async with contextlib.AsyncExitStack() as stack:
            began = time.perf_counter()
            members = [await stack.enter_async_context(open_member(
                MemberSpec(f"b3nch001-1.{rank}", str(HEAT), params, rank, p, MEMORY), containment=containment,
                settings=settings, scratch_root=folder / "scratch")) for rank in range(p)]
            answers = await step_all(members, [{} for _ in range(p)])  # waits for every interpreter to start
            started = time.perf_counter() - began
            inboxes = deliver([answer.outbox for answer in answers], p)
            began = time.perf_counter()
            checkpoints = [await member.checkpoint(inboxes[rank]) for rank, member in enumerate(members)]
            checkpoint = time.perf_counter() - began
            guest_cpu = sum(member.figures().cpu_seconds for member in members)
            began, cpu, supersteps = time.perf_counter(), time.process_time(), 1
            while True:
                answers = await step_all(members, inboxes)
                supersteps += 1
                if check_agreement([answer.done for answer in answers], supersteps - 1):
                    break
                inboxes = deliver([answer.outbox for answer in answers], p)
            seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
            guest_cpu = sum(member.figures().cpu_seconds for member in members) - guest_cpu
            for member in members:
                await member.finish()
    finally:
        containment.close()
    return {"start_seconds": started, "supersteps": supersteps, "seconds": seconds, "guest_cpu_seconds": guest_cpu,
            "driver_cpu_seconds": cpu,
            "checkpoint_seconds": checkpoint, "checkpoint_bytes": sum(len(c) for c in checkpoints)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="p = 2 only")
    args = parser.parse_args()
    plugin = load_plugin_file(HEAT)
    rows, figures = [], []
    for p in (2,) if args.quick else (2, 3, 4):
        for plate, (height, width, iterations) in PLATES.items():
            params = {"height": height, "width": width, "members": p, "iterations": iterations}
            began, cpu = time.perf_counter(), time.process_time()
            run_gang_locally(plugin, params, checkpoint_every=None)
            local, local_cpu = time.perf_counter() - began, time.process_time() - cpu
            with tempfile.TemporaryDirectory(prefix="gang-bench-") as folder:
                guests = trio.run(in_guests, params, p, Path(folder))
            supersteps = guests["supersteps"]
            timed = supersteps - 1  # after the first, which waited for the interpreters
            local_step, guest_step = local / (iterations + 1), guests["seconds"] / timed
            local_cpu_step = local_cpu / (iterations + 1)
            gang_cpu_step = (guests["guest_cpu_seconds"] + guests["driver_cpu_seconds"]) / timed
            rows.append([p, f"{height}x{width}", supersteps, local_step * 1000, guest_step * 1000,
                         (guest_step - local_step) * 1000, local_cpu_step * 1000, gang_cpu_step * 1000,
                         (gang_cpu_step - local_cpu_step) * 1000 / p, guests["start_seconds"],
                         guests["checkpoint_seconds"] * 1000])
            figures.append({"p": p, "plate": [height, width], **guests, "local_seconds": local,
                            "local_cpu_seconds": local_cpu,
                            "local_ms_per_superstep": local_step * 1000, "guest_ms_per_superstep": guest_step * 1000,
                            "overhead_ms_per_superstep": (guest_step - local_step) * 1000,
                            "cpu_overhead_ms_per_member_superstep": (gang_cpu_step - local_cpu_step) * 1000 / p})
    print_table(["p", "plate", "supersteps", "1 process ms/ss", "guests ms/ss", "overhead ms/ss",
                 "1 process CPU ms/ss", "gang CPU ms/ss", "CPU overhead ms/member/ss", "start s", "checkpoint ms"], rows)
    print(f"load average {os.getloadavg()[0]:.1f}: guests at SCHED_IDLE wait for idle CPU; the CPU columns do not")
    write_results("gang_superstep", {"runs": figures})


if __name__ == "__main__":
    main()
