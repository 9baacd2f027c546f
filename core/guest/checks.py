"""Pure judgements about a guest: is it stuck, how did it die, whose fault, may this checkpoint resume it.

No processes, no clocks: the running guest samples, these decide, so tests can table them.
"""

from __future__ import annotations

import signal

import psutil

from frost_core.guest.views import Failed, GuestTask
from frost_core.storage.checkpoints import CheckpointRecord

_ASLEEP = (psutil.STATUS_SLEEPING, psutil.STATUS_DISK_SLEEP)
# Failures the plugin causes itself: running it again elsewhere gives the same answer.
_PLUGIN_FAULTS = ("plugin", "state", "memory")


def asleep_since(previous: float | None, status: str, now: float) -> float | None:
    """Since when the guest has been asleep at every look (None: it is not asleep now).

    A starved guest stays runnable; only one asleep at every look since its last step is stuck.
    """
    if status not in _ASLEEP:
        return None
    return now if previous is None else previous


def stuck_reason(*, cpu_since_progress: float, asleep_for: float | None, step_timeout: float) -> str | None:
    """Why a guest that reported no progress counts as stuck, or None if it does not (yet)."""
    if cpu_since_progress > step_timeout:
        return (f"no progress: a step ran {cpu_since_progress:.1f} s of CPU without finishing "
                f"(step timeout {step_timeout:g} s)")
    if asleep_for is not None and asleep_for > step_timeout:
        return f"no progress: a step has been blocked for {asleep_for:.1f} s (step timeout {step_timeout:g} s)"
    return None


def cpu_percent(since: tuple[float, float], now: float, cpu: float) -> float:
    """CPU use in percent of one core between the sample `since` (time, CPU seconds) and now."""
    elapsed = now - since[0]
    return 100.0 * (cpu - since[1]) / elapsed if elapsed > 0 else 0.0


def reported_failure(kind: str, reason: str) -> Failed:
    """The outcome of a failure the guest reported itself; the plugin's own faults are not retried."""
    return Failed(f"{kind}: {reason}", retryable=kind not in _PLUGIN_FAULTS)


def crash_failure(code: int, stderr_tail: list[str]) -> Failed:
    """The outcome of a guest that died without saying why: worth another try elsewhere."""
    tail = "; ".join(stderr_tail)
    return Failed(f"crashed: the guest {describe_exit(code)}" + (f" (stderr: {tail})" if tail else ""),
                  retryable=True)


def describe_exit(code: int) -> str:
    """A process's return code in words ("was killed by SIGKILL")."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with code {code} without reporting why"


def newer_owner(task: GuestTask, record: CheckpointRecord | None) -> Failed | None:
    """A refusal if the checkpoint comes from a newer ownership epoch than this assignment's."""
    if record is None or record.epoch <= task.epoch:
        return None
    return Failed(
        f"task {task.task_id} has a checkpoint from ownership epoch {record.epoch}, newer than this "
        f"assignment's epoch {task.epoch}: another node owns it now",
        retryable=False,
    )


def same_code(task: GuestTask, record: CheckpointRecord) -> bool:
    """Whether the checkpoint was taken by this plugin code for this unit (else it cannot resume it)."""
    return (record.plugin_hash, record.unit_index) == (task.plugin_hash, task.unit.index)
