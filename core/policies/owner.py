"""The owner policy: suspend guests at once, evict them if the owner stays, resume after quiet.

Like HTCondor's START/SUSPEND/CONTINUE/PREEMPT with BOINC's in-use signals, as a pure state
machine: `decide_owner(state, view, now, settings)` returns the next state and a decision
that names its rule and figures. Hysteresis has three layers: separate busy and quiet
thresholds, a quiet period before resuming, and a quiet period that doubles when the owner
comes back soon after a resume (so guests never flap), relaxing after a calm spell.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum


_TOLERANCE = 1e-6   # seconds: a timer set for t fires at t despite float rounding


class GuestAction(str, Enum):
    RUN = "run"
    SUSPEND = "suspend"
    EVICT = "evict"


@dataclass(frozen=True)
class OwnerSettings:
    """Mirrors the [owner] section of the configuration (same names, same units)."""

    busy_cpu_percent: float = 25.0      # owner's own CPU use (percent of one core) that means active
    quiet_ratio: float = 0.5            # below busy × this the owner counts as quiet (hysteresis)
    input_idle: float = 60.0            # input more recent than this means the owner is at the desk
    memory_pressure: float = 10.0       # /proc/pressure/memory "full avg10" percent that means active
    evict_after: float = 120.0          # seconds of activity before suspended guests leave
    resume_after: float = 30.0          # quiet seconds before suspended guests continue
    evict_hold: float = 300.0           # seconds after an eviction with no new guests
    evict_window: float = 600.0         # activity adds up over this many seconds: an owner who keeps
                                        # coming back (spikes) counts like one who stays
    max_backoff: int = 8                # the quiet period grows up to this many times resume_after

    def __post_init__(self) -> None:
        for name in ("busy_cpu_percent", "input_idle", "memory_pressure", "evict_after", "resume_after", "evict_hold",
                     "evict_window"):
            if getattr(self, name) < 0:
                raise ValueError(f"owner setting {name} cannot be negative")
        if not 0 < self.quiet_ratio <= 1:
            raise ValueError("owner setting quiet_ratio must lie in (0, 1]")


@dataclass(frozen=True)
class OwnerView:
    """What the sampler saw of the owner over the last interval."""

    owner_cpu_percent: float                # CPU of non-guest processes, percent of one core
    input_idle: float | None = None         # seconds since the last keyboard/mouse/tty input
    memory_pressure: float | None = None    # PSI memory full avg10, percent
    cpu_pressure: float | None = None       # PSI cpu some avg10, percent (shown, not acted on)
    interval: float = 0.0                   # seconds the reading covers: a quiet reading vouches for all of them


class Phase(str, Enum):
    RUNNING = "running"
    SUSPENDED = "suspended"
    EVICTING = "evicting"


@dataclass(frozen=True)
class OwnerState:
    phase: Phase = Phase.RUNNING
    active_since: float | None = None
    quiet_since: float | None = None
    resumed_at: float = float("-inf")
    evicted_at: float = float("-inf")
    backoff: int = 1
    history: tuple[tuple[float, float], ...] = ()   # past (start, end) of activity within evict_window


@dataclass(frozen=True)
class OwnerDecision:
    """What to do with every guest now, which rule said so, and on which figures."""

    action: GuestAction
    rule: str
    reason: str
    accepting: bool                 # may this node take new guests now?
    recheck_at: float | None        # when the decision may change with no new reading
    figures: tuple[tuple[str, float], ...]

    def explain(self) -> str:
        shown = ", ".join(f"{name} {value:.3g}" for name, value in self.figures)
        return f"{self.action.value} by rule '{self.rule}': {self.reason} [{shown}]"


def owner_evidence(view: OwnerView, settings: OwnerSettings) -> tuple[str | None, bool]:
    """(why the owner is active or None, whether the owner is clearly quiet)."""
    quiet_cpu = settings.busy_cpu_percent * settings.quiet_ratio
    if view.owner_cpu_percent >= settings.busy_cpu_percent:
        return f"owner CPU {view.owner_cpu_percent:.0f}% >= {settings.busy_cpu_percent:.0f}%", False
    if view.memory_pressure is not None and view.memory_pressure >= settings.memory_pressure:
        return f"memory pressure {view.memory_pressure:.1f}% >= {settings.memory_pressure:.1f}%", False
    if view.input_idle is not None and view.input_idle < settings.input_idle:
        return f"input {view.input_idle:.0f} s ago (< {settings.input_idle:.0f} s)", False
    calm_memory = view.memory_pressure is None or view.memory_pressure < settings.memory_pressure / 2
    return None, view.owner_cpu_percent < quiet_cpu and calm_memory


def decide_owner(state: OwnerState, view: OwnerView, now: float, settings: OwnerSettings = OwnerSettings(),
                 leave_after: float | None = None) -> tuple[OwnerState, OwnerDecision]:
    """One step of the owner state machine; call it on every reading (and at `recheck_at`).

    `leave_after` is what moving the guests away would cost them (seconds, eq. 5.2's T_m of
    the costliest one), when the caller knows it; `leave_at` says how long they wait for the
    owner with it (ski rental, judged on the owner's recent spells). Without it, `evict_after`.
    """
    active, quiet = owner_evidence(view, settings)
    if state.phase is Phase.RUNNING:
        if state.backoff > 1 and now - state.resumed_at >= _flap_window(settings, state.backoff):
            state = replace(state, backoff=1)
        if active is None:
            return state, _decision(state, view, now, settings, GuestAction.RUN, "start",
                                    "owner not active", None)
        flapping = now - state.resumed_at < _flap_window(settings, state.backoff)
        backoff = min(state.backoff * 2, settings.max_backoff) if flapping else state.backoff
        history = tuple(h for h in state.history if h[1] > now - settings.evict_window)
        state = OwnerState(Phase.SUSPENDED, active_since=now, resumed_at=state.resumed_at,
                           evicted_at=state.evicted_at, backoff=backoff, history=history)
        evict_after = leave_at(state, now, settings, leave_after)
        if active_seconds(state, now, settings) >= evict_after - _TOLERANCE:
            state = replace(state, phase=Phase.EVICTING, evicted_at=now)
            return state, _decision(state, view, now, settings, GuestAction.EVICT, "evict",
                                    f"{active}, again: active {active_seconds(state, now, settings):.0f} s "
                                    f"of the last {settings.evict_window:.0f} s", None)
        return state, _decision(state, view, now, settings, GuestAction.SUSPEND, "suspend", active,
                                now + evict_after - active_seconds(state, now, settings))
    # Suspended or evicting.
    if not quiet:
        state = replace(state, quiet_since=None)
        if active is None:
            action = GuestAction.EVICT if state.phase is Phase.EVICTING else GuestAction.SUSPEND
            return state, _decision(state, view, now, settings, action, "hold",
                                    "owner between the busy and quiet thresholds", None)
        total = active_seconds(state, now, settings)
        evict_after = leave_at(state, now, settings, leave_after)
        if state.phase is Phase.EVICTING or total >= evict_after - _TOLERANCE:
            if state.phase is not Phase.EVICTING:
                state = replace(state, phase=Phase.EVICTING, evicted_at=now)
            return state, _decision(state, view, now, settings, GuestAction.EVICT, "evict",
                                    f"{active}; active {total:.0f} s of the last {settings.evict_window:.0f} s",
                                    None)
        return state, _decision(state, view, now, settings, GuestAction.SUSPEND, "suspend", active,
                                now + evict_after - total)
    quiet_since = state.quiet_since if state.quiet_since is not None else _quiet_began(state, view, now)
    needed = settings.resume_after * state.backoff
    if now - quiet_since >= needed - _TOLERANCE:
        assert state.active_since is not None
        history = state.history + ((state.active_since, quiet_since),)
        state = OwnerState(Phase.RUNNING, resumed_at=now, evicted_at=state.evicted_at, backoff=state.backoff,
                           history=history)
        return state, _decision(state, view, now, settings, GuestAction.RUN, "continue",
                                f"owner quiet for {now - quiet_since:.0f} s (>= {needed:.0f} s)", None)
    state = replace(state, quiet_since=quiet_since)
    action = GuestAction.EVICT if state.phase is Phase.EVICTING else GuestAction.SUSPEND
    return state, _decision(state, view, now, settings, action, "wait-quiet",
                            f"owner quiet for {now - quiet_since:.0f} s of {needed:.0f} s", quiet_since + needed)


def leave_at(state: OwnerState, now: float, settings: OwnerSettings, leave_after: float | None) -> float:
    """The active seconds (as `active_seconds` counts them) at which suspended guests are evicted.

    Ski rental: waiting for the owner to leave costs the guests every second it lasts; moving
    them costs `leave_after` once. With nothing known of how long the owner stays, wait until
    waiting has cost what moving would (Harchol-Balter & Downey: migrate once the age exceeds
    the migration cost): `leave_after`, counted over the owner's activity within
    `evict_window` like `evict_after`, so an owner who keeps coming back is left at once.

    The owner model: if every spell the owner had within `evict_window` was shorter than
    `evict_after` (spikes, the activity `evict_after` is there to ride out, like HTCondor's
    suspend-before-preempt and BOINC's "suspend while in use"), the current spell is predicted
    to end as those did (a spell's past predicts its future, as a process's age predicts its
    lifetime): the guests wait until it has outlived the longest of them, plus `leave_after`
    (once the prediction is proven wrong the plain rule applies to the rest, which bounds the
    loss: ski rental with a prediction, Purohit, Svitkina & Kumar 2018). Spikes then cost a
    suspension instead of a move each. A recent spell of `evict_after` or more predicts a long
    one, and the plain rule applies. `evict_after` of activity within the window always evicts.
    """
    if leave_after is None:
        return settings.evict_after
    cost = max(leave_after, 0.0)
    longest = longest_recent_spell(state, now, settings)
    if longest is None or longest >= settings.evict_after or state.active_since is None:
        return min(settings.evict_after, cost)
    # Evict when the current spell (counted from active_since) has lasted longest + cost: the
    # activity of earlier spells within the window plus that.
    return min(settings.evict_after, _earlier_active(state, now, settings) + longest + cost)


def longest_recent_spell(state: OwnerState, now: float, settings: OwnerSettings) -> float | None:
    """The longest spell of owner activity that ended within `evict_window`, None if there was none."""
    spells = [end - begin for begin, end in state.history if end > now - settings.evict_window]
    return max(spells) if spells else None


def _quiet_began(state: OwnerState, view: OwnerView, now: float) -> float:
    """When the quiet this first quiet reading shows began: the start of the interval it covers.

    The reading averages the owner's CPU over `view.interval` seconds, so the owner has been
    quiet for all of them; counting the quiet period from the reading instead would add one
    sampling interval to every suspension. Never before the activity itself was noticed.
    """
    began = now - max(view.interval, 0.0)
    return began if state.active_since is None else max(began, state.active_since)


def active_seconds(state: OwnerState, now: float, settings: OwnerSettings) -> float:
    """Seconds the owner was active within the last `evict_window`, the current spell included."""
    start = now - settings.evict_window
    total = _earlier_active(state, now, settings)
    if state.active_since is not None and state.phase is not Phase.RUNNING:
        total += now - max(state.active_since, start) if state.quiet_since is None else \
            max(0.0, state.quiet_since - max(state.active_since, start))
    return total


def _earlier_active(state: OwnerState, now: float, settings: OwnerSettings) -> float:
    """Seconds of the past spells (not the current one) within the last `evict_window`."""
    start = now - settings.evict_window
    return sum(max(0.0, min(end, now) - max(begin, start)) for begin, end in state.history)


def accepts_guests(state: OwnerState, now: float, settings: OwnerSettings) -> bool:
    """May this node take new guests? Not while its guests are held, nor within `evict_hold` of the owner's return.

    The hold follows every spell of owner activity, not only one that evicted guests
    (HTCondor's START on KeyboardIdle): an owner who just came back tends to come back
    again, and a guest sent there now would be suspended or sent on at the next spell.
    """
    last_active = state.history[-1][1] if state.history else float("-inf")
    return state.phase is Phase.RUNNING and now - max(state.evicted_at, last_active) >= settings.evict_hold


def _flap_window(settings: OwnerSettings, backoff: int) -> float:
    """A suspension this soon after a resume counts as flapping."""
    return 2 * settings.resume_after * backoff


def _decision(state: OwnerState, view: OwnerView, now: float, settings: OwnerSettings, action: GuestAction,
              rule: str, reason: str, recheck_at: float | None) -> OwnerDecision:
    figures = [("owner_cpu_percent", view.owner_cpu_percent)]
    for name in ("input_idle", "memory_pressure", "cpu_pressure"):
        value = getattr(view, name)
        if value is not None:
            figures.append((name, value))
    if state.phase is not Phase.RUNNING:
        figures.append(("active_seconds", active_seconds(state, now, settings)))
    if state.backoff > 1:
        figures.append(("quiet_needed", settings.resume_after * state.backoff))
    accepting = accepts_guests(state, now, settings)
    return OwnerDecision(action, rule, reason, accepting, recheck_at, tuple(figures))


class OwnerPolicy:
    """The owner state machine for one node: the live node calls `decide` on every reading."""

    def __init__(self, settings: OwnerSettings = OwnerSettings()) -> None:
        self.settings = settings
        self.state = OwnerState()
        self.last: OwnerDecision | None = None

    def decide(self, view: OwnerView, now: float, leave_after: float | None = None) -> OwnerDecision:
        self.state, self.last = decide_owner(self.state, view, now, self.settings, leave_after)
        return self.last

    def accepting(self, now: float) -> bool:
        return accepts_guests(self.state, now, self.settings)

    def explain(self) -> str:
        """Why guests run, are suspended or leave ("why is this guest suspended?")."""
        return self.last.explain() if self.last else "no owner reading yet"
