"""Which isolation layers hold guests on this machine and why any is missing: one report for status, UI and docs.

The node probes once at start: the cgroup backend it got, the kernel's Landlock ABI, whether a
network namespace can be made, and which user guests run as. The guest child then takes the
same steps and reports any that failed anyway. `guests.isolation = "strict"` refuses a guest
with any layer missing; "best-effort" (the default) runs it and says so in a visible warning.
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass

from frost_core.guest.cgroups import Layout
from frost_core.guest.confine import guest_user, landlock_abi, landlock_absence, leave_network

STRICT = "strict"
BEST_EFFORT = "best-effort"
MODES = (BEST_EFFORT, STRICT)


@dataclass(frozen=True)
class GuestUser:
    """The account guests run as; `switch` is False when they keep the node's own."""

    uid: int
    gid: int
    name: str
    switch: bool


@dataclass(frozen=True)
class IsolationReport:
    """The layers in force; each `missing` entry is one sentence naming the layer and the reason."""

    mode: str
    cgroups: str
    landlock_abi: int
    network: bool
    user: GuestUser
    missing: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return not self.missing

    def warning(self) -> str:
        """What the owner should know ("" when every layer holds)."""
        if not self.missing:
            return ""
        if self.mode == STRICT:
            return "strict isolation: guests are refused here because " + "; ".join(self.missing)
        return "guests run with less isolation than this product intends: " + "; ".join(self.missing)

    def layers(self) -> tuple[tuple[str, str], ...]:
        """(layer, state) pairs for the Machine tab and the docs."""
        return (
            ("cgroups", self.cgroups),
            ("files", f"Landlock ABI {self.landlock_abi}" if self.landlock_abi else "not confined"),
            ("network", "own namespace, no interfaces up" if self.network else "shared with the desk"),
            ("user", f"uid {self.user.uid} ({self.user.name})"),
        )

    def lines(self) -> tuple[str, ...]:
        """One "layer: state" line per layer, then "warning: ..." when any is missing (status, the UI, docs)."""
        warning = self.warning()
        return tuple(f"{layer}: {state}" for layer, state in self.layers()) + ((f"warning: {warning}",) if warning else ())

    def refusal(self) -> str:
        """Why a guest may not start here under this mode ("" when it may)."""
        return self.warning() if self.mode == STRICT and self.missing else ""


def describe_cgroups(layout: Layout) -> str:
    if layout.kind == "none":
        return "none"
    weight = ", under a parent of nice-19 CPU weight" if "cpu" in layout.controllers else ""
    where = f", {layout.where}" if layout.where else ""
    return f"{layout.kind} ({', '.join(layout.controllers)}){weight}{where}"


def probe_isolation(layout: Layout, mode: str) -> IsolationReport:
    """What a guest started now would get; the kernel facts are probed, nothing is assumed."""
    missing = [f"cgroups: {reason}" for reason in layout.missing]
    abi = landlock_abi()
    if not abi:
        missing.append(f"files: {landlock_absence()}; guests can read whatever the node's user can")
    network = _probe_network()
    if network:
        missing.append(f"network: no namespace of its own ({network}); guests reach whatever the desk reaches")
    user, why_not = _guest_account()
    if why_not:
        missing.append(f"user: {why_not}")
    return IsolationReport(mode=mode, cgroups=describe_cgroups(layout), landlock_abi=abi, network=not network,
                           user=user, missing=tuple(missing))


def _probe_network() -> str:
    """Try the guest's own step in a forked child: "" if it can leave the network, else why not."""
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux-only"
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():  # 3.12 warns of fork in a threaded process; this child never returns to Python
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child only makes syscalls and leaves with _exit: safe after fork in a threaded node
        os.close(read_end)
        os.write(write_end, leave_network().encode()[:500])
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        outcome = reader.read().decode(errors="replace")
    os.waitpid(pid, 0)
    return "" if outcome == "ok" else outcome.removeprefix("failed: ")


def _guest_account() -> tuple[GuestUser, str]:
    """The account guests run as, and why it is the node's own where the node is root.

    The guest child loads the interpreter, its modules and the plugin as root and drops to this
    account after: it need not reach them (a pyenv under /root is closed to `nobody`).
    """
    uid, gid = os.geteuid(), os.getegid()
    own = GuestUser(uid, gid, _user_name(uid), switch=False)
    if uid != 0:
        return own, ""
    account = guest_user()
    if account is None:
        return own, "the node is root and this machine has neither a frost-guest nor a nobody user; guests run as root"
    return GuestUser(account.pw_uid, account.pw_gid, account.pw_name, switch=True), ""


def _user_name(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)
