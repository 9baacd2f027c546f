"""Memory caps for a guest: the kernel's address-space limit inside, an RSS watch outside.

RLIMIT_AS makes an allocation beyond the cap fail inside the guest (Python raises MemoryError),
which catches a runaway plugin at once; it counts address space, not memory, so it gets the
interpreter's baseline on top of the unit's declared need. Where RLIMIT_AS is not enforced
(macOS) the supervisor's RSS watch (`memory_verdict`) is the cap. Where the guest has a memory
cgroup (cgroups.py) that is the cap instead, and the kernel's OOM kill gives `memory_kill_reason`.
"""

from __future__ import annotations

MIB = 1024 * 1024


def address_space_cap(memory_bytes: int, baseline_bytes: int) -> int:
    """The RLIMIT_AS a guest gets: its declared need plus the interpreter's own address space."""
    return max(memory_bytes, 0) + max(baseline_bytes, 0)


def apply_memory_limits(address_space_bytes: int) -> tuple[tuple[str, str], ...]:
    """Cap this process's address space and turn off core dumps; report each step like priority does."""
    try:
        import resource
    except ImportError:
        return (("rlimit_as", "not available on this OS"), ("rlimit_core", "not available on this OS"))
    steps = []
    for name, limit, value in (("rlimit_as", "RLIMIT_AS", address_space_bytes), ("rlimit_core", "RLIMIT_CORE", 0)):
        which = getattr(resource, limit, None)
        if which is None:
            steps.append((name, "not available on this OS"))
            continue
        try:
            resource.setrlimit(which, (value, value))
            steps.append((name, "ok"))
        except (OSError, ValueError) as error:
            steps.append((name, f"failed: {error}"))
    return tuple(steps)


def memory_verdict(rss_bytes: int, memory_bytes: int, slack_bytes: int) -> str | None:
    """Why a guest using `rss_bytes` breaks its declaration, or None while it stays within it."""
    cap = memory_bytes + slack_bytes
    if rss_bytes <= cap:
        return None
    return (
        f"memory: the guest uses {rss_bytes / MIB:.1f} MiB, over its declared "
        f"{memory_bytes / MIB:.1f} MiB plus {slack_bytes / MIB:.0f} MiB for the interpreter"
    )


OUTBOX_MARGIN = 16 * MIB
"""What the room for a checkpoint memfd keeps back under the cap: the encoding's own small allocations."""


def outbox_room(rss_bytes: int, kept_bytes: int, memory_bytes: int, slack_bytes: int) -> int:
    """The biggest state a guest using `rss_bytes` may put in its checkpoint memfd (which holds `kept_bytes`
    already), and not be killed for it; 0 until its memory was measured. Bigger ones go up the pipe.

    The memfd's pages are charged to the guest, beside its state and whatever the encoding
    copied of it (as much again, at worst): through the pipe a 48 MiB state under a 104 MiB cap
    is checkpointed, through the memfd its cgroup killed it at the first checkpoint. So only half
    of what the cap leaves is offered.
    """
    if rss_bytes <= 0:
        return 0
    return max(0, (memory_bytes + slack_bytes - OUTBOX_MARGIN - rss_bytes - kept_bytes) // 2)


def memory_kill_reason(memory_bytes: int, slack_bytes: int) -> str:
    """Why the kernel killed a guest in its memory cgroup, whose limit is its declaration plus slack."""
    return (
        f"memory: the guest was killed by its memory cgroup: it used more than its declared "
        f"{memory_bytes / MIB:.0f} MiB plus {slack_bytes / MIB:.0f} MiB for the interpreter"
    )
