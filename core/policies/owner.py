"""The owner policy: guests share the desk at the lowest priority, step aside on contention, leave if it lasts.

Like BOINC's "while in use" and HTCondor's START/SUSPEND/CONTINUE/PREEMPT as a pure state
machine: `decide_owner(state, view, now, settings)` returns the next state and a decision that
names its rule, its figures and when it ends. The owner picks a preset (`share`, `idle-only`,
`always`); desk rules (battery, heat, named programs, schedules) arrive as `DeskVerdict`s, each
one more input with its own explanation line. Hysteresis has three layers: separate busy and
quiet thresholds, a quiet period before resuming, and a quiet period that doubles when the owner
comes back soon after a resume (so guests never flap), relaxing after a calm spell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum


_TOLERANCE = 1e-6   # seconds: a timer set for t fires at t despite float rounding


class GuestAction(str, Enum):
    RUN = "run"
    SUSPEND = "suspend"
    EVICT = "evict"


class Preset(str, Enum):
    """What the owner lends: `share` the desk while working, only an `idle-only` one, or `always` (a server)."""

    SHARE = "share"
    IDLE_ONLY = "idle-only"
    ALWAYS = "always"


@dataclass(frozen=True)
class OwnerSettings:
    """Mirrors the [owner] section of the configuration (same names, same units)."""

    policy: str = Preset.SHARE.value    # share, idle-only or always
    busy_cpu_percent: float = 70.0      # owner CPU, percent of ALL cores averaged over cpu_window, that is contention
    quiet_ratio: float = 0.5            # below busy × this the owner counts as quiet (hysteresis)
    input_idle: float = 60.0            # idle-only: input more recent than this means the owner is at the desk
    memory_pressure: float = 10.0       # PSI memory "some avg10" percent that evicts at once
    cpu_pressure: float = 40.0          # PSI cpu "some avg10" percent (read while no guest ran) that is contention
    evict_after: float = 120.0          # seconds of contention before suspended guests leave
    resume_after: float = 30.0          # quiet seconds before suspended guests continue
    evict_hold: float = 300.0           # seconds after an eviction BY THIS POLICY with no new guests
    evict_window: float = 600.0         # activity adds up over this many seconds: an owner who keeps
                                        # coming back (spikes) counts like one who stays
    max_backoff: int = 8                # the quiet period grows up to this many times resume_after

    def __post_init__(self) -> None:
        for name in ("busy_cpu_percent", "input_idle", "memory_pressure", "cpu_pressure", "evict_after",
                     "resume_after", "evict_hold", "evict_window"):
            if getattr(self, name) < 0:
                raise ValueError(f"owner setting {name} cannot be negative")
        if not 0 < self.quiet_ratio <= 1:
            raise ValueError("owner setting quiet_ratio must lie in (0, 1]")
        if self.policy not in {p.value for p in Preset}:
            raise ValueError(f"owner setting policy must be one of {', '.join(p.value for p in Preset)}")


@dataclass(frozen=True)
class DeskVerdict:
    """One desk rule's say (battery, temperature, a named program, a schedule window, a CPU cap).

    `action` RUN means no objection (the line still explains, e.g. a CPU cap in force); SUSPEND
    counts like owner contention (suspend now, evict if it lasts); EVICT sends the guests away
    now. `policy` lets a schedule window pick the preset for now (None keeps the configured one).
    """

    rule: str
    action: GuestAction
    reason: str
    figures: tuple[tuple[str, float], ...] = ()
    ends_at: float | None = None        # when this verdict ends by itself, if known
    policy: str | None = None

    def explain(self) -> str:
        shown = ", ".join(f"{name} {value:.3g}" for name, value in self.figures)
        return f"{self.rule}: {self.reason}" + (f" [{shown}]" if shown else "")


@dataclass(frozen=True)
class OwnerView:
    """What the sampler saw of the owner; the CPU is already the window's average, self-inflicted use removed."""

    cpu_share: float                        # owner CPU, percent of all cores, averaged over the window
    input_idle: float | None = None         # seconds since the last keyboard/mouse/tty input
    memory_pressure: float | None = None    # PSI memory some avg10, percent
    cpu_pressure: float | None = None       # PSI cpu some avg10, percent; None while guests ran (they inflate it)
    interval: float = 0.0                   # seconds the reading covers: a quiet reading vouches for all of them
    desk: tuple[DeskVerdict, ...] = ()      # the desk rules' verdicts, each with its own explanation line


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
    evicted_at: float = float("-inf")      # the last eviction by this policy (the owner's own `e` is no hold)
    backoff: int = 1
    history: tuple[tuple[float, float], ...] = ()   # past (start, end) of activity within evict_window


@dataclass(frozen=True)
class OwnerDecision:
    """What to do with every guest now, which rule said so, on which figures, and until when."""

    action: GuestAction
    rule: str
    reason: str
    accepting: bool                 # may this node take new guests now?
    recheck_at: float | None        # when the decision may change with no new reading
    figures: tuple[tuple[str, float], ...]
    ends_at: float | None = None    # when the suspension evicts or the hold ends, if known
    desk: tuple[DeskVerdict, ...] = ()

    def explain(self) -> str:
        shown = ", ".join(f"{name} {value:.3g}" for name, value in self.figures)
        return f"{self.action.value} by rule '{self.rule}': {self.reason} [{shown}]"

    def lines(self) -> tuple[str, ...]:
        """The decision's line, then one line per desk rule that had a say."""
        return (self.explain(),) + tuple(verdict.explain() for verdict in self.desk)

    def describe(self, now: float) -> str:
        """In the owner's words, with its rule and when it ends, as of `now` (status, banner, Guests tab)."""
        left = format_span(self.ends_at - now) if self.ends_at is not None else None
        if self.action is GuestAction.RUN:
            text = self.reason if self.accepting or left is None else \
                f"holding new guests for {left} after an eviction (rule '{self.rule}')"
        elif self.rule == "wait-quiet" and self.action is GuestAction.SUSPEND:
            text = f"guests suspended by the owner policy: {self.reason}; they continue in {left}"
        elif self.rule == "wait-quiet":  # evicted: the hold after the eviction follows, and says how long
            text = f"guests evicted by the owner policy: {self.reason}"
        elif self.action is GuestAction.SUSPEND:
            text = f"guests suspended by rule '{self.rule}': {self.reason}" + \
                (f"; they leave in {left} if it lasts" if left is not None else "")
        else:
            text = f"guests evicted by rule '{self.rule}': {self.reason}"
        desk = [v.explain() for v in self.desk if v.action is not GuestAction.RUN]
        return "; ".join([text, *desk])


@dataclass(frozen=True)
class Evidence:
    """One reason the owner counts as active: its rule, its words, and whether it evicts at once."""

    rule: str
    reason: str
    evict: bool = False


def current_preset(view: OwnerView, settings: OwnerSettings) -> Preset:
    """The configured preset, unless a desk rule (a schedule window) picks another for now."""
    chosen = [v.policy for v in view.desk if v.policy is not None]
    return Preset(chosen[-1] if chosen else settings.policy)


def windowed_share(intervals: Sequence[tuple[float, float]], cpus: int, window: float) -> float:
    """The owner's CPU as a percent of all cores over the last `window` seconds of (wall, CPU seconds) intervals.

    Judged on a window, not one reading: a program starting (a CLI call, a compiler's first
    second) is a spike, contention is what lasts. Intervals count newest first until they
    cover the window (readings a little over a second apart make a 2 s window two readings).
    No reading yet: 0.
    """
    wall = cpu = 0.0
    for seconds, used in reversed(intervals):
        if wall >= window - _TOLERANCE:
            break
        wall += seconds
        cpu += used
    return 100.0 * cpu / (wall * max(cpus, 1)) if wall > 0 else 0.0


def owner_evidence(view: OwnerView, settings: OwnerSettings) -> tuple[list[Evidence], bool]:
    """(every reason the owner counts as active, whether the owner is clearly quiet).

    `share`: CPU contention only (the window's average over all cores at or above busy, or the
    owner's tasks waiting for a CPU per PSI while above the quiet line); typing and reading are
    not contention, guests at SCHED_IDLE cost the owner no more than ~2 % of a core.
    `idle-only`: any recent input, or a CPU above the quiet line. `always`: neither.
    Every preset: memory pressure evicts at once (stopped guests keep their memory), and the
    desk rules' SUSPEND/EVICT verdicts count.
    """
    preset = current_preset(view, settings)
    quiet_cpu = settings.busy_cpu_percent * settings.quiet_ratio
    evidence: list[Evidence] = []
    if preset is Preset.SHARE:
        if view.cpu_share >= settings.busy_cpu_percent:
            evidence.append(Evidence("cpu-contention", f"owner CPU {view.cpu_share:.0f}% of all cores "
                                     f">= {settings.busy_cpu_percent:.0f}%"))
        elif view.cpu_pressure is not None and view.cpu_pressure >= settings.cpu_pressure \
                and view.cpu_share >= quiet_cpu:
            evidence.append(Evidence("cpu-pressure", f"owner tasks waiting for a CPU {view.cpu_pressure:.0f}% "
                                     f"of the time (>= {settings.cpu_pressure:.0f}%)"))
    elif preset is Preset.IDLE_ONLY:
        if view.input_idle is not None and view.input_idle < settings.input_idle:
            evidence.append(Evidence("input", f"input {view.input_idle:.0f} s ago (< {settings.input_idle:.0f} s)"))
        if view.cpu_share >= quiet_cpu:
            evidence.append(Evidence("cpu-busy", f"owner CPU {view.cpu_share:.0f}% of all cores "
                                     f">= {quiet_cpu:.0f}% (idle-only)"))
    if view.memory_pressure is not None and view.memory_pressure >= settings.memory_pressure:
        evidence.append(Evidence("memory-pressure", f"memory pressure {view.memory_pressure:.1f}% "
                                 f">= {settings.memory_pressure:.1f}%", evict=True))
    for verdict in view.desk:
        if verdict.action is not GuestAction.RUN:
            evidence.append(Evidence(verdict.rule, verdict.reason, evict=verdict.action is GuestAction.EVICT))
    calm_cpu = preset is Preset.ALWAYS or view.cpu_share < quiet_cpu
    calm_memory = view.memory_pressure is None or view.memory_pressure < settings.memory_pressure / 2
    return evidence, not evidence and calm_cpu and calm_memory


def decide_owner(state: OwnerState, view: OwnerView, now: float, settings: OwnerSettings = OwnerSettings(),
                 leave_after: float | None = None, movable: bool = True) -> tuple[OwnerState, OwnerDecision]:
    """One step of the owner state machine; call it on every reading (and at `recheck_at`).

    `leave_after` is what moving the guests away would cost them (seconds, eq. 5.2's T_m of
    the costliest one), when the caller knows it; `leave_at` says how long they wait for the
    owner with it (ski rental, judged on the owner's recent spells). Without it, `evict_after`.
    `movable` False (no guests, or no peer to take them) means lasting contention only keeps
    them suspended: an eviction to nowhere would throw work away and hold the machine for
    nothing. Memory pressure and desk EVICT verdicts evict regardless.
    """
    evidence, quiet = owner_evidence(view, settings)
    first = evidence[0] if evidence else None
    evicting_now = next((e for e in evidence if e.evict), None)
    if state.phase is Phase.RUNNING:
        if state.backoff > 1 and now - state.resumed_at >= _flap_window(settings, state.backoff):
            state = replace(state, backoff=1)
        if first is None:
            return state, _decision(state, view, now, settings, GuestAction.RUN, "quiet", "owner not contending", None)
        flapping = now - state.resumed_at < _flap_window(settings, state.backoff)
        backoff = min(state.backoff * 2, settings.max_backoff) if flapping else state.backoff
        history = tuple(h for h in state.history if h[1] > now - settings.evict_window)
        state = OwnerState(Phase.SUSPENDED, active_since=now, resumed_at=state.resumed_at,
                           evicted_at=state.evicted_at, backoff=backoff, history=history)
        if evicting_now is not None:
            state = replace(state, phase=Phase.EVICTING, evicted_at=now)
            return state, _decision(state, view, now, settings, GuestAction.EVICT, evicting_now.rule,
                                    evicting_now.reason, None)
        evict_after = leave_at(state, now, settings, leave_after)
        if movable and active_seconds(state, now, settings) >= evict_after - _TOLERANCE:
            state = replace(state, phase=Phase.EVICTING, evicted_at=now)
            return state, _decision(state, view, now, settings, GuestAction.EVICT, "evict",
                                    f"{first.reason}, again: active {active_seconds(state, now, settings):.0f} s "
                                    f"of the last {settings.evict_window:.0f} s", None)
        ends = now + evict_after - active_seconds(state, now, settings) if movable else None
        return state, _decision(state, view, now, settings, GuestAction.SUSPEND, first.rule, first.reason, ends,
                                ends_at=ends)
    # Suspended or evicting.
    if not quiet:
        state = replace(state, quiet_since=None)
        if first is None:
            action = GuestAction.EVICT if state.phase is Phase.EVICTING else GuestAction.SUSPEND
            return state, _decision(state, view, now, settings, action, "between",
                                    "owner between the busy and quiet thresholds", None)
        total = active_seconds(state, now, settings)
        evict_after = leave_at(state, now, settings, leave_after)
        if state.phase is Phase.EVICTING or evicting_now is not None or \
                (movable and total >= evict_after - _TOLERANCE):
            if state.phase is not Phase.EVICTING:
                state = replace(state, phase=Phase.EVICTING, evicted_at=now)
            rule = evicting_now.rule if evicting_now is not None else "evict"
            return state, _decision(state, view, now, settings, GuestAction.EVICT, rule,
                                    f"{first.reason}; active {total:.0f} s of the last {settings.evict_window:.0f} s",
                                    None)
        ends = now + evict_after - total if movable else None
        return state, _decision(state, view, now, settings, GuestAction.SUSPEND, first.rule, first.reason, ends,
                                ends_at=ends)
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
                            f"owner quiet for {now - quiet_since:.0f} s of {needed:.0f} s", quiet_since + needed,
                            ends_at=quiet_since + needed)


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
    """May this node take new guests? Not while its guests are stopped, nor within `evict_hold` of this policy's eviction.

    Only an eviction holds (what docs/configuration.md promises): a suspension that ended on its
    own says the owner's work fits beside guests again, and the lowest priority keeps the next
    guest out of the owner's way. Starting the node holds nothing.
    """
    return state.phase is Phase.RUNNING and now - state.evicted_at >= settings.evict_hold


def hold_ends(state: OwnerState, settings: OwnerSettings) -> float:
    """When the hold after this policy's last eviction ends."""
    return state.evicted_at + settings.evict_hold


def _flap_window(settings: OwnerSettings, backoff: int) -> float:
    """A suspension this soon after a resume counts as flapping."""
    return 2 * settings.resume_after * backoff


def _decision(state: OwnerState, view: OwnerView, now: float, settings: OwnerSettings, action: GuestAction,
              rule: str, reason: str, recheck_at: float | None, ends_at: float | None = None) -> OwnerDecision:
    figures = [("cpu_share", view.cpu_share)]
    for name in ("input_idle", "memory_pressure", "cpu_pressure"):
        value = getattr(view, name)
        if value is not None:
            figures.append((name, value))
    if state.phase is not Phase.RUNNING:
        figures.append(("active_seconds", active_seconds(state, now, settings)))
    if state.backoff > 1:
        figures.append(("quiet_needed", settings.resume_after * state.backoff))
    accepting = accepts_guests(state, now, settings)
    if action is GuestAction.RUN and not accepting:
        # Guests may run, but none are taken: the hold after this policy's eviction, with its end.
        ends_at = hold_ends(state, settings)
        left = ends_at - now
        rule, reason = "hold-after-evict", f"holding new guests for {format_span(left)} after an eviction"
        figures.append(("hold_left", left))
        recheck_at = ends_at
    return OwnerDecision(action, rule, reason, accepting, recheck_at, tuple(figures), ends_at, view.desk)


def format_span(seconds: float) -> str:
    """'4 m 12 s', '45 s', '1 h 5 m': a span the owner reads at a glance."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} m"
    return f"{minutes} m {secs} s" if minutes else f"{secs} s"


class OwnerPolicy:
    """The owner state machine for one node: the live node calls `decide` on every reading."""

    def __init__(self, settings: OwnerSettings = OwnerSettings()) -> None:
        self.settings = settings
        self.state = OwnerState()
        self.last: OwnerDecision | None = None

    def decide(self, view: OwnerView, now: float, leave_after: float | None = None,
               movable: bool = True) -> OwnerDecision:
        self.state, self.last = decide_owner(self.state, view, now, self.settings, leave_after, movable)
        return self.last

    def accepting(self, now: float) -> bool:
        return accepts_guests(self.state, now, self.settings)

    def explain(self) -> str:
        """Why guests run, are suspended or leave ("why is this guest suspended?")."""
        return self.last.explain() if self.last else "no owner reading yet"
