"""What the kernel refused a guest's plugin code, noted where Python reaches the kernel, so the node hears of it.

Confinement is the kernel's (Landlock, the guest's user, its namespace, its cgroup); plugin code
that catches the error would leave the node none the wiser. So before plugin code runs the child
wraps the calls an escape goes through (files, sockets, signals, priority, user ids, fork) and
notes each refusal: EACCES, EPERM, ENETUNREACH, EROFS, and EAGAIN from fork. Notes are sent at the next migration
point, never from inside plugin code (a plugin's thread could interleave frames otherwise).
Code that calls the kernel directly (ctypes) is still refused, but unreported: the note is news
for the owner, the enforcement is the kernel's.
"""

from __future__ import annotations

import builtins
import errno
import functools
import io
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

REFUSALS = frozenset({errno.EACCES, errno.EPERM, errno.ENETUNREACH, errno.EROFS})
FORK_REFUSALS = frozenset({errno.EAGAIN})  # pids.max; elsewhere EAGAIN is a busy non-blocking socket, no refusal
MAX_NOTED = 50
"""Refusals noted per guest; after that only a count (a fork loop is refused thousands of times)."""
_WRITING = set("wax+")


class RefusalLog:
    """The refusals noted since the last `take`, plus how many went past `MAX_NOTED`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._noted: list[tuple[str, str]] = []
        self._count = 0
        self._taken = 0

    def note(self, attempt: str, error: OSError) -> None:
        with self._lock:
            self._count += 1
            if self._count <= MAX_NOTED:
                self._noted.append((attempt, f"{type(error).__name__}: {error.strerror or error}"))

    def take(self) -> list[tuple[str, str]]:
        """The notes not taken yet, with one line for those past the limit."""
        with self._lock:
            noted, self._noted = self._noted, []
            unlisted = self._count - max(self._taken, MAX_NOTED)
            if unlisted > 0:
                noted.append(("more attempts", f"{unlisted} refusals not listed one by one"))
            self._taken = self._count
            return noted


def watch_refusals(log: RefusalLog) -> None:
    """Wrap this process's file, socket, signal, priority, user and fork calls so each refusal is noted in `log`."""
    opened = _watched(io.open, log, lambda file, mode="r", *_, **__: f"open {file!r} for {_purpose(mode)}")
    builtins.open = io.open = opened
    os.open = _watched(os.open, log, lambda path, flags, *_, **__: f"open {path!r} (flags {flags:#o})")
    for name in ("listdir", "scandir"):
        setattr(os, name, _watched(getattr(os, name), log, lambda path=".", *_, name=name: f"{name} {path!r}"))
    for name in ("mkdir", "remove", "unlink", "rmdir"):
        setattr(os, name, _watched(getattr(os, name), log, lambda path, *_, name=name, **__: f"{name} {path!r}"))
    os.rename = _watched(os.rename, log, lambda source, target, *_, **__: f"rename {source!r} to {target!r}")
    for name in ("connect", "sendto", "bind"):
        setattr(socket.socket, name, _watched(getattr(socket.socket, name), log,
                                              lambda sock, *args, name=name: f"{name} to {args[-1]!r}"))
    for name in ("kill", "killpg"):
        setattr(os, name, _watched(getattr(os, name), log, lambda target, sig, name=name: f"{name} {target} with signal {sig}"))
    os.setpriority = _watched(os.setpriority, log, lambda which, who, nice: f"setpriority to nice {nice}")
    os.nice = _watched(os.nice, log, lambda step: f"nice by {step}")
    os.sched_setscheduler = _watched(os.sched_setscheduler, log,
                                     lambda pid, policy, param: f"sched_setscheduler to policy {policy}")
    for name in ("setuid", "setgid", "seteuid", "setegid", "setresuid", "setresgid", "setgroups"):
        setattr(os, name, _watched(getattr(os, name), log, lambda *ids, name=name: f"{name}{ids}"))
    os.fork = _watched(os.fork, log, lambda: "fork", FORK_REFUSALS)


def _purpose(mode: str) -> str:
    return "writing" if _WRITING & set(mode) else "reading"


def _watched(function: Callable[..., Any], log: RefusalLog, describe: Callable[..., str],
             refusals: frozenset[int] = REFUSALS) -> Callable[..., Any]:
    @functools.wraps(function)
    def watched(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except OSError as error:
            if error.errno in refusals:
                log.note(_describe(describe, args, kwargs), error)
            raise

    return watched


def _describe(describe: Callable[..., str], args: tuple, kwargs: dict) -> str:
    try:
        return describe(*args, **kwargs)[:500]
    except (TypeError, ValueError, IndexError):  # called in a form the description does not know
        return f"a call with {args!r}"[:500]
