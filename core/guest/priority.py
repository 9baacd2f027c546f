"""Put the calling process at the lowest CPU priority the OS offers, and make that permanent.

Linux ranks autogroups (one per session) before niceness, so a plain nice-19 process in the
owner's terminal session still competes as an equal session. A guest therefore runs in its own
session (the parent starts it with start_new_session=True), sets its autogroup to nice 19, its
own nice to 19 and its policy to SCHED_IDLE. Then it gives up what would let it climb back:
RLIMIT_NICE to the minimum, no_new_privs, and every capability (the node may run as root; a
root node's guest switches to an unprivileged user on the way, see `drop_capabilities`).
Each step may be unavailable (another OS, an unprivileged container): it is reported and skipped.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from frost_core.guest.kernel_files import read_kernel_file

GUEST_NICE = 19
AUTOGROUP_RETRIES = 10
AUTOGROUP_RETRY_DELAY = 0.05

_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_HIGHEST_CAPABILITY = 63


@dataclass(frozen=True)
class PriorityReport:
    """Which steps took effect ("ok") and why the others did not, for the guest's log."""

    steps: tuple[tuple[str, str], ...]

    @property
    def failed(self) -> tuple[tuple[str, str], ...]:
        return tuple(step for step in self.steps if step[1] != "ok")

    def summary(self) -> str:
        return ", ".join(f"{name}: {outcome}" for name, outcome in self.steps)


@dataclass(frozen=True)
class PriorityView:
    """A process's scheduling priority as the supervisor sees it from outside."""

    nice: int | None
    idle_policy: bool | None
    autogroup_nice: int | None

    def raised_from(self, floor: PriorityView) -> str | None:
        """Name what climbed above `floor` (the priority the guest settled at), or None."""
        if self.nice is not None and floor.nice is not None and self.nice < floor.nice:
            return f"nice {floor.nice} -> {self.nice}"
        if (
            self.autogroup_nice is not None
            and floor.autogroup_nice is not None
            and self.autogroup_nice < floor.autogroup_nice
        ):
            return f"autogroup nice {floor.autogroup_nice} -> {self.autogroup_nice}"
        if floor.idle_policy and self.idle_policy is False:
            return "scheduling policy SCHED_IDLE -> another"
        return None


def enter_guest_priority() -> PriorityReport:
    """Lower this process to guest priority, then drop every way back up. Call before plugin code."""
    lowered = lower_priority()
    locked = forbid_raising()
    return PriorityReport(lowered.steps + locked.steps + drop_capabilities().steps)


def lower_priority() -> PriorityReport:
    """Autogroup 19, nice 19, SCHED_IDLE: each where the OS allows it."""
    return PriorityReport((
        ("autogroup", _set_autogroup_nice()),
        ("nice", _set_nice()),
        ("sched_idle", _set_idle_policy()),
    ))


def forbid_raising() -> PriorityReport:
    """RLIMIT_NICE to the minimum and no_new_privs (Linux; skipped elsewhere); capabilities stay for `drop_capabilities`."""
    return PriorityReport((
        ("rlimit_nice", _lock_nice_limit()),
        ("no_new_privs", _set_no_new_privs()),
    ))


def drop_capabilities(become: Callable[[], str] | None = None) -> PriorityReport:
    """Empty the capability bounding set, run `become` (the switch to the guests' user), then empty every other set.

    The bounding set needs CAP_SETPCAP and the user switch CAP_SETUID, so both come before the
    sets that hold those capabilities are emptied.
    """
    steps = [("capability_bound", _drop_bounding_set())]
    if become is not None:
        steps.append(("user", become()))
    steps.append(("capabilities", _drop_capabilities()))
    return PriorityReport(tuple(steps))


def read_priority(pid: int) -> PriorityView:
    """What priority `pid` runs at now; None for what this OS cannot tell."""
    try:
        nice = os.getpriority(os.PRIO_PROCESS, pid)
    except OSError:
        nice = None
    idle_policy: bool | None = None
    if hasattr(os, "sched_getscheduler") and hasattr(os, "SCHED_IDLE"):
        try:
            idle_policy = os.sched_getscheduler(pid) == os.SCHED_IDLE
        except OSError:
            idle_policy = None
    return PriorityView(nice=nice, idle_policy=idle_policy, autogroup_nice=_read_autogroup_nice(pid))


def _set_autogroup_nice() -> str:
    path = Path("/proc/self/autogroup")
    if not path.exists():
        return "not available on this OS"
    for _ in range(AUTOGROUP_RETRIES):
        try:
            path.write_text(str(GUEST_NICE))
            return "ok"
        except OSError as error:
            # The kernel accepts one unprivileged autogroup change per 100 ms machine-wide.
            if error.errno != errno.EAGAIN:
                return f"failed: {error.strerror}"
            time.sleep(AUTOGROUP_RETRY_DELAY)
    return "failed: kernel kept answering EAGAIN"


def _read_autogroup_nice(pid: int) -> int | None:
    try:
        text = read_kernel_file(f"/proc/{pid}/autogroup")
    except OSError:
        return None
    _, _, nice = text.strip().rpartition(" ")
    return int(nice) if nice.lstrip("-").isdigit() else None


def _set_nice() -> str:
    try:
        os.setpriority(os.PRIO_PROCESS, 0, GUEST_NICE)
    except OSError as error:
        return f"failed: {error.strerror}"
    return "ok"


def _set_idle_policy() -> str:
    if not hasattr(os, "SCHED_IDLE"):
        return "not available on this OS"
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except OSError as error:
        return f"failed: {error.strerror}"
    return "ok"


def _lock_nice_limit() -> str:
    try:
        import resource
    except ImportError:
        return "not available on this OS"
    if not hasattr(resource, "RLIMIT_NICE"):
        return "not available on this OS"
    try:
        resource.setrlimit(resource.RLIMIT_NICE, (0, 0))
    except (OSError, ValueError) as error:
        return f"failed: {error}"
    return "ok"


@functools.cache
def libc() -> ctypes.CDLL | None:
    """The C library, errno kept for ctypes.get_errno (Linux; None elsewhere).

    The interpreter's own symbols (dlopen(NULL)) include libc's; `ctypes.util.find_library`
    would fork `ldconfig` in a guest that is about to be confined.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _set_no_new_privs() -> str:
    lib = libc()
    if lib is None:
        return "not available on this OS"
    if lib.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"failed: {os.strerror(ctypes.get_errno())}"
    return "ok"


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_bounding_set() -> str:
    """Empty the bounding and ambient sets: what a later exec could grant. "ok" also when unprivileged (nothing to drop)."""
    lib = libc()
    if lib is None:
        return "not available on this OS"
    for capability in range(_HIGHEST_CAPABILITY + 1):
        # Fails with EINVAL past the kernel's last capability and EPERM when unprivileged;
        # either way no_new_privs keeps an exec from granting any.
        if lib.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL:
                break
    lib.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    return "ok"


def _drop_capabilities() -> str:
    """Empty the effective, permitted and inheritable sets."""
    lib = libc()
    if lib is None or not hasattr(lib, "capset"):
        return "not available on this OS"
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if lib.capset(ctypes.byref(header), data) != 0:
        return f"failed: {os.strerror(ctypes.get_errno())}"
    return "ok"
