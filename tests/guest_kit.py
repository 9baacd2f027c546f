"""The test plugins and helpers the guest tests share: plugin sources, a recorder, fast settings, tasks."""

from __future__ import annotations

import textwrap
from pathlib import Path

import psutil

from frost_core.guest import GuestEvent, GuestSettings, GuestTask
from frost_core.plugin.api import WorkUnit
from frost_core.plugin.registry import content_hash, load_plugin_file

MIB = 1024 * 1024

HEADER = "from frost_core import Done, Output, Plugin, WorkUnit\n"
COMBINE = """
def split(self, params):
    return [WorkUnit(0, {}, 1 << 20, 1.0)]

def combine(self, params, results):
    return Output(b"", "text/plain", "out.txt")
"""

COUNTER = HEADER + textwrap.dedent(
    """
    class Counter(Plugin):
        name = "counter"
        version = "1"

        def start(self, unit):
            return {"i": 0, "n": unit.data["n"], "spin": unit.data.get("spin", 0),
                    "talk": unit.data.get("talk", False), "total": 0}

        def step(self, state):
            i = state["i"]
            if i >= state["n"]:
                return Done({"total": state["total"], "n": i})
            extra = 0
            for k in range(state["spin"]):
                extra = (extra + k * i) % 1000003
            if state["talk"]:
                print(f"row {i} done")
                print("\\x00\\x00\\x00\\x10 not a frame")
            return {**state, "i": i + 1, "total": (state["total"] * 31 + i * i + extra) % (1 << 61)}

        def progress(self, state):
            return state["i"] / state["n"]
    """
) + textwrap.indent(COMBINE, "    ") + "\nplugin = Counter()\n"


# A counter whose state carries `mib` MiB of ballast (2 by default): moves and captures of a state
# that takes a while to write, send and sync.
BALLAST = HEADER + textwrap.dedent(
    """
    class Ballast(Plugin):
        name = "ballast"
        version = "1"

        def start(self, unit):
            return {"i": 0, "n": unit.data["n"], "total": 0, "ballast": bytes(range(256)) * (unit.data.get("mib", 2) * 4096)}

        def step(self, state):
            i = state["i"]
            if i >= state["n"]:
                return Done({"total": state["total"], "ballast": sum(state["ballast"][::65536])})
            extra = 0
            for k in range(3000):
                extra = (extra + k * i) % 1000003
            return {**state, "i": i + 1, "total": (state["total"] * 31 + i * i + extra) % (1 << 61)}

        def progress(self, state):
            return state["i"] / state["n"]

        def split(self, params):
            return []

        def combine(self, params, results):
            return results
    """
) + "\nplugin = Ballast()\n"


def broken(body: str) -> str:
    """A plugin whose start/step/progress are `body`, with the boilerplate around it."""
    return HEADER + "import os\n\nclass Broken(Plugin):\n    name = 'broken'\n    version = '1'\n" + textwrap.indent(
        textwrap.dedent(body) + COMBINE, "    "
    ) + "\nplugin = Broken()\n"


FOREVER = broken(
    """
    def start(self, unit):
        return {"i": 0}
    def step(self, state):
        while True:
            state["i"] += 1
    def progress(self, state):
        return 0.0
    """
)
NOT_CBOR = broken(
    """
    def start(self, unit):
        return {"seen": {1, 2, 3}}
    def step(self, state):
        return state
    def progress(self, state):
        return 0.0
    """
)
HUGE_STATE = broken(
    """
    def start(self, unit):
        return {"blob": b"x" * (32 * 1024 * 1024)}
    def step(self, state):
        return state
    def progress(self, state):
        return 0.0
    """
)
GREEDY = broken(
    """
    def start(self, unit):
        return {"mode": unit.data["mode"]}
    def step(self, state):
        if state["mode"] == "at-once":
            hog = bytearray(4 << 30)
        else:
            global HOARD
            HOARD = globals().get("HOARD", [])
            HOARD.append(bytearray(4 << 20))
            for chunk in HOARD[-1:]:
                chunk[::4096] = b"x" * len(chunk[::4096])
        return state
    def progress(self, state):
        return 0.0
    """
)
RAISER = broken(
    """
    def start(self, unit):
        return {"i": 0}
    def step(self, state):
        raise ValueError("row 7 has no pixels")
    def progress(self, state):
        return 0.0
    """
)
CRASHER = broken(
    """
    def start(self, unit):
        return {"i": 0}
    def step(self, state):
        os._exit(7)
    def progress(self, state):
        return 0.0
    """
)
CLIMBER = broken(
    """
    def start(self, unit):
        return {}
    def step(self, state):
        attempts = {}
        for name, call in (
            ("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, 0, 0)),
            ("nice", lambda: os.nice(-10)),
            ("sched_other", lambda: os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))),
        ):
            try:
                call()
                attempts[name] = "allowed"
            except OSError as error:
                attempts[name] = "refused"
        return Done({"attempts": attempts, "nice": os.getpriority(os.PRIO_PROCESS, 0),
                     "idle": os.sched_getscheduler(0) == os.SCHED_IDLE})
    def progress(self, state):
        return 0.0
    """
)
AUTOGROUP_CLIMBER = broken(
    """
    def start(self, unit):
        return {"done": False}
    def step(self, state):
        if not state["done"]:
            try:
                with open("/proc/self/autogroup", "w") as f:
                    f.write("0")
                state = {"done": True}
            except PermissionError as error:  # confined: the guest cannot even try
                return Done({"refused": str(error)})
            except OSError:
                pass  # EAGAIN: one autogroup change per 100 ms machine-wide
        return state
    def progress(self, state):
        return 0.0
    """
)
SCRIBBLER = broken(
    """
    def start(self, unit):
        return {"i": 0}
    def step(self, state):
        import sys
        fd = int(sys.argv[sys.argv.index("--write-fd") + 1])
        os.write(fd, b"\\xff" * 64)  # garbage on the node's private pipe
        return state
    def progress(self, state):
        return 0.0
    """
)
SYNTAX_ERROR = "def broken(:\n"


class Recorder:
    """Collects the supervisor's events, as the node's event log would."""

    def __init__(self) -> None:
        self.events: list[GuestEvent] = []

    def __call__(self, event: GuestEvent) -> None:
        self.events.append(event)

    def messages(self, kind: str) -> list[str]:
        return [e.message for e in self.events if e.kind == kind]


def fast_settings(**changes) -> GuestSettings:
    """Checkpoints every 50 ms and quick watches, so tests see everything in well under a second."""
    values = dict(
        min_checkpoint_interval=0.05, max_checkpoint_interval=0.05, step_timeout=1.0,
        progress_interval=0.02, watch_interval=0.02, evict_deadline=10.0, checkpoint_deadline=10.0,
    )
    values.update(changes)
    return GuestSettings(**values)


def write_plugin(folder: Path, name: str, source: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(source)
    return path


def make_task(path: Path, data: dict | None = None, *, memory: int = 8 * MIB, task_id: str = "n0de0001-1.0",
              epoch: int = 1) -> GuestTask:
    return GuestTask(
        task_id=task_id, assignment_id=task_id.rpartition(".")[0], origin="n0de0001", plugin_name=path.stem,
        plugin_version="1", plugin_hash=content_hash(path), plugin_path=str(path),
        unit=WorkUnit(0, data or {}, memory, 1.0), epoch=epoch,
    )


def counter_result(path: Path, data: dict) -> dict:
    """What the counter unit gives when nothing interrupts it, computed in this process."""
    plugin = load_plugin_file(path)
    state = plugin.start(WorkUnit(0, data, MIB, 1.0))
    while True:
        state = plugin.step(state)
        if not isinstance(state, dict):
            return state.result


def guest_processes() -> list[psutil.Process]:
    """This process's guest processes (and what they forked); short-lived children may vanish while we look."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            if "frost_core.guest.child" in " ".join(process.cmdline()):
                found.append(process)
        except psutil.NoSuchProcess:
            continue
    return found


def guest_cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


# About a second of guest CPU in small steps: long enough to pause, kill and evict it mid-way.
LONG = {"n": 1500, "spin": 2000}
