"""Speed calibration and the idle and heavy extremities, measured once and kept on disk (FROST 5.2.1)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from frost_core.api.errors import ConfigError
from frost_core.measure.probe import probe_share_blocking

log = logging.getLogger("frost.measure")

REFERENCE_RATE = 2.0e7   # loop iterations per second that count as speed 1.0


def measure_speed(seconds: float = 0.2, rounds: int = 3) -> float:
    """Speed of one CPU relative to the reference, at normal priority; the best of `rounds`.

    The best round is the one least disturbed by other processes: speed is a property of
    the machine, availability is measured separately.
    """
    best = 0.0
    for _ in range(rounds):
        count, start = 0, time.perf_counter()
        end = start + seconds
        while time.perf_counter() < end:
            for _ in range(10000):
                pass
            count += 10000
        best = max(best, count / (time.perf_counter() - start))
    return best / REFERENCE_RATE


@dataclass(frozen=True)
class Extremities:
    """What guests could get here when the machine is idle and when every CPU is busy, in speed units."""

    speed: float
    cpus: int
    idle: float
    heavy: float
    measured_at: float

    def save(self, path: Path) -> None:
        """Whole or not at all, even across a power cut: a torn file would cost the next start a measurement."""
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        with open(temporary, "w") as handle:
            handle.write(json.dumps(asdict(self)))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)

    @classmethod
    def load(cls, path: Path) -> Extremities:
        try:
            data = json.loads(path.read_text())
            return cls(float(data["speed"]), int(data["cpus"]), float(data["idle"]), float(data["heavy"]),
                       float(data["measured_at"]))
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ConfigError(f"cannot read the measured extremities in {path}: {error}; "
                              f"delete the file or measure them again") from error


def _start_hog(seconds: float) -> subprocess.Popen:
    """A normal-priority busy loop in a plain subprocess.

    Not multiprocessing: its resource tracker passes our stderr's descriptor on, and under a
    Textual app or a capturing test runner that descriptor is not a real one.
    """
    loop = f"import time\nend = time.perf_counter() + {seconds!r}\nwhile time.perf_counter() < end: pass"
    return subprocess.Popen([sys.executable, "-c", loop], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def measure_extremities(cpus: int | None = None, seconds: float = 0.5) -> Extremities:
    """Idle: a guest-priority probe on a quiet machine; heavy: the same with every CPU kept busy.

    Blocks for about 2 × `seconds` plus process start-up: run it from the command line or
    a worker thread, never on the node's loop.
    """
    cpus = cpus or os.cpu_count() or 1
    speed = measure_speed()
    idle_share = probe_share_blocking(seconds)
    hogs = [_start_hog(seconds + 1.0) for _ in range(cpus)]
    try:
        time.sleep(0.3)   # let the hogs get going
        heavy_share = probe_share_blocking(seconds)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    return Extremities(speed, cpus, idle_share * speed * cpus, heavy_share * speed * cpus, time.time())


def load_or_measure(path: Path, remeasure: bool = False) -> Extremities:
    """The extremities from `path`, measuring and saving them on first run, when asked, or when the file cannot
    be read (they are this machine's figures, measured again in a second: no reason to refuse to start)."""
    if path.exists() and not remeasure:
        try:
            return Extremities.load(path)
        except ConfigError as error:
            log.warning("%s; measuring them again", error.message)
    extremities = measure_extremities()
    extremities.save(path)
    return extremities
