"""What the node and the guest supervisor hand each other: tasks, settings, outcomes, events, figures."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from frost_core.storage.checkpoints import CheckpointRecord
from frost_core.guest.limits import MIB
from frost_core.plugin.api import WorkUnit
from frost_core.plugin.limits import MAX_STATE_BYTES
from frost_core.plugin.plain import decode_plain
from frost_core.policies.prefetch import spares_for


@dataclass(frozen=True)
class InputFile:
    """An input file of an assignment: the name its plugin opens, and the content hash it is fetched and cached by."""

    name: str
    sha256: str
    size: int


@dataclass(frozen=True)
class GuestTask:
    """One unit to run here. `task_id` ("{assignment_id}.{unit_index}") stays the same wherever it runs."""

    task_id: str
    assignment_id: str
    origin: str
    plugin_name: str
    plugin_version: str
    plugin_hash: str
    plugin_path: str
    unit: WorkUnit
    epoch: int
    inputs: tuple[InputFile, ...] = ()


@dataclass(frozen=True)
class GuestSettings:
    """How guests are run; `from_config` maps the owner's [checkpoints] and [guests] options."""

    min_checkpoint_interval: float = 30.0
    max_checkpoint_interval: float = 900.0
    interruptions_per_hour: float = 2.0
    step_timeout: float = 120.0
    """CPU seconds (or blocked wall seconds) one step may take before the guest counts as stuck."""
    checkpoint_deadline: float = 2.0
    """How long "checkpoint now" waits for the guest before falling back to the last checkpoint."""
    evict_deadline: float = 0.8
    """The same wait during an eviction, shorter so the CPU is free within a second."""
    memory_slack_bytes: int = 64 * MIB
    """RSS allowed above the unit's declared need: the interpreter itself."""
    address_space_baseline_bytes: int = 256 * MIB
    """RLIMIT_AS above the declared need: an interpreter maps far more than it touches."""
    max_state_bytes: int = MAX_STATE_BYTES
    progress_interval: float = 0.2
    watch_interval: float = 0.1
    log_lines_per_second: int = 50
    warm_spare: bool = False
    """Keep guest processes started ahead (`GuestSupervisor.keep_warm`); the node turns it on."""
    spares: int = 1
    """How many, with `warm_spare`: one for each unit an assignment starts at once (see `spawn.WarmSpare`)."""
    units_per_process: int = 1000
    """Units of one assignment a guest process runs in turn before a fresh one takes over (see `warm.py`)."""
    isolation: str = "best-effort"
    """"strict": refuse a guest when an isolation layer is missing here (see isolation.py)."""
    max_processes: int = 64

    @classmethod
    def from_config(cls, config: Any) -> GuestSettings:
        """Settings from a `frost_core.config.Config` (anything with `.get("section.key")`)."""
        return cls(
            min_checkpoint_interval=float(config.get("checkpoints.min_interval")),
            max_checkpoint_interval=float(config.get("checkpoints.max_interval")),
            interruptions_per_hour=float(config.get("checkpoints.owner_interruptions_per_hour")),
            step_timeout=float(config.get("guests.step_timeout")),
            warm_spare=bool(config.get("guests.warm_spare")),
            spares=spares_for(int(config.get("guests.cpus")) or os.cpu_count() or 1),
            units_per_process=int(config.get("guests.units_per_process")),
            isolation=str(config.get("guests.isolation")),
            max_processes=int(config.get("guests.max_processes")),
        )


@dataclass(frozen=True)
class Completed:
    """The unit finished; `result` is its canonical CBOR encoding (decode with `value()`), `files` its output files."""

    result: bytes
    files: dict[str, bytes] = field(default_factory=dict)
    cpu_seconds: float = field(default=0.0, compare=False)   # CPU its guest process used here (ledger)

    def value(self) -> Any:
        return decode_plain(self.result, "result")


@dataclass(frozen=True)
class Failed:
    """The unit failed here; `retryable` is False when the plugin itself is at fault (a retry fails alike)."""

    reason: str
    retryable: bool
    cpu_seconds: float = field(default=0.0, compare=False)   # CPU its guest process used here (ledger)


@dataclass(frozen=True)
class Evicted:
    """The guest left this machine; resume it elsewhere from `checkpoint` (None: from the start)."""

    checkpoint: CheckpointRecord | None
    cpu_seconds: float = field(default=0.0, compare=False)   # CPU its guest process used here (ledger)
    progress: float = field(default=0.0, compare=False)
    """How far it got here: with `cpu_seconds`, what it still needs (its guest and figures are gone)."""


@dataclass(frozen=True)
class Stopped:
    """The node stopped the unit on purpose: its assignment was cancelled, or its master runs a newer copy.
    Not a failure: nothing is reported to its master or counted against its retries, and the event log
    says so at the level of a normal stop rather than an error."""

    reason: str
    cpu_seconds: float = field(default=0.0, compare=False)   # CPU its guest process used here (ledger)


Outcome = Completed | Failed | Evicted | Stopped


@dataclass(frozen=True)
class GuestEvent:
    """A line for the event log.

    `kind` is one of start, guest-log, checkpoint, pause, resume, evict, completed, failed, error.
    """

    task_id: str
    kind: str
    message: str
    level: str = "info"
    at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class GuestFigures:
    """Live figures of one guest for the UI and `status --json`."""

    task_id: str
    assignment_id: str
    plugin: str
    origin: str
    state: str
    progress: float
    cpu_seconds: float
    cpu_percent: float
    """CPU use over about the last second, in percent of one core."""
    wall_seconds: float
    since_checkpoint_seconds: float
    cpu_since_checkpoint_seconds: float
    checkpoint_bytes: int
    memory_bytes: int
    last_checkpoint_seq: int | None
