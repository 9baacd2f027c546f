"""What a guest may see: its scratch folder read-write, what Python needs read-only, no network, no other uid.

Plugin code arrives from any cluster member, so the guest child confines itself before it loads
that code: at start, while it still holds the node's privileges, it enters a network namespace
of its own (nothing to connect to); after GuestStart names its scratch folder and plugin, it
reads the plugin (preload.py), restricts its file access with Landlock (unprivileged, Linux >=
5.13; it also forbids TCP from ABI 4 and signals to processes outside it from ABI 6) and, on a
root node, becomes an unprivileged user that owns only its scratch folder.
Each step reports "ok" or why not, like the priority steps; the node decides whether a guest
with a missing layer may run (`guests.isolation`).
"""

from __future__ import annotations

import ctypes
import os
import pwd
import stat
import sys
import sysconfig
from pathlib import Path

from frost_core.guest.priority import libc

GUEST_USERS = ("frost-guest", "nobody")
SYSTEM_READ_ONLY = ("/lib", "/lib64", "/lib32", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/etc/ld.so.cache",
                    "/etc/localtime", "/usr/share/zoneinfo", "/dev/null", "/dev/zero", "/dev/urandom")
"""Shared libraries and the few device files an interpreter opens after start-up."""

_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_V1 = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_FILE_ONLY = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none (old kernel, not enabled, not Linux)."""
    lib = libc()
    if lib is None:
        return 0
    version = lib.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                           ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(version, 0)


def landlock_absence() -> str:
    """Why Landlock cannot be used here, in words for the isolation report ("" when it can)."""
    if not sys.platform.startswith("linux"):
        return "Landlock is Linux-only"
    if landlock_abi() > 0:
        return ""
    return f"this kernel has no Landlock (it needs Linux 5.13 with landlock among its LSMs): {os.strerror(ctypes.get_errno())}"


def python_paths() -> tuple[str, ...]:
    """What this interpreter reads: its prefixes, stdlib and every import folder, and the frost_core package."""
    package = Path(__file__).resolve().parent.parent  # frost_core's folder (its surface is a layer above guest/)
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, str(Path(sys.executable).resolve().parent)}
    paths.update(value for value in sysconfig.get_paths().values() if value)
    paths.update(entry for entry in sys.path if entry and os.path.isabs(entry))
    paths.add(str(package))
    return tuple(sorted(path for path in paths if os.path.exists(path)))


def readable_paths(extra: tuple[str, ...], *, secrets: tuple[str, ...]) -> tuple[str, ...]:
    """System libraries, Python's paths and `extra`, minus any that would contain one of `secrets`.

    A folder granted read-only grants everything under it: an import path of "/" or of the home
    folder would open the data directory, so such a path is left out rather than trusted.
    """
    candidates = dict.fromkeys((*SYSTEM_READ_ONLY, *python_paths(), *extra))
    kept = []
    for candidate in candidates:
        if not os.path.exists(candidate):
            continue
        resolved = Path(candidate).resolve()
        if any(_contains(resolved, Path(secret).resolve()) for secret in secrets):
            continue
        kept.append(candidate)
    return tuple(kept)


def _contains(folder: Path, inner: Path) -> bool:
    return inner == folder or folder in inner.parents


def restrict_files(read_only: tuple[str, ...], read_write: tuple[str, ...]) -> str:
    """Landlock this process (and all it forks): only these paths, no TCP, no signals out. "ok" or why not.

    Needs no_new_privs (set by `priority.forbid_raising`) or CAP_SYS_ADMIN.
    """
    lib = libc()
    abi = landlock_abi()
    if lib is None or abi <= 0:
        return "failed: " + (landlock_absence() or "Landlock is not available")
    handled = _FS_V1 | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0) | (_IOCTL_DEV if abi >= 5 else 0)
    attr = _RulesetAttr(handled, _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0,
                        _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = lib.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return f"failed: landlock_create_ruleset: {os.strerror(ctypes.get_errno())}"
    try:
        for paths, access in ((read_only, _EXECUTE | _READ_FILE | _READ_DIR), (read_write, handled)):
            for path in paths:
                problem = _allow(lib, ruleset, path, access & handled)
                if problem:
                    return f"failed: {path}: {problem}"
        if lib.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return f"failed: landlock_restrict_self: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ruleset)
    return "ok"


def _allow(lib: ctypes.CDLL, ruleset: int, path: str, access: int) -> str:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as error:
        return "" if isinstance(error, FileNotFoundError) else error.strerror or str(error)
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _FILE_ONLY  # the kernel refuses directory rights on a file
        rule = _PathBeneathAttr(access, fd)
        if lib.syscall(_SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                        ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
            return f"landlock_add_rule: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(fd)
    return ""


def leave_network() -> str:
    """Enter a new network namespace (only a downed loopback in it): "ok" or why not.

    As root directly; otherwise inside a new user namespace, where the kernel allows those.
    """
    lib = libc()
    if lib is None:
        return "failed: network namespaces are Linux-only"
    flags = _CLONE_NEWNET if os.geteuid() == 0 else _CLONE_NEWUSER | _CLONE_NEWNET
    if lib.unshare(ctypes.c_int(flags)) != 0:
        return f"failed: unshare: {os.strerror(ctypes.get_errno())}"
    return "ok"


def guest_user() -> pwd.struct_passwd | None:
    """The unprivileged account a root node runs guests as: `frost-guest` if it exists, else `nobody`."""
    for name in GUEST_USERS:
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    return None


def become_user(uid: int, gid: int) -> str:
    """Drop to `uid`/`gid` for good, real, effective and saved ids, no supplementary groups (needs root).

    "ok" only once the kernel confirms each: a half-done switch (groups kept, a saved uid of 0
    to switch back to) is reported as failed, never run with.
    """
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError as error:
        return f"failed: {error.strerror}"
    if os.getgroups() or os.getresgid() != (gid, gid, gid) or os.getresuid() != (uid, uid, uid):
        return (f"failed: the kernel kept uids {os.getresuid()}, gids {os.getresgid()}, "
                f"groups {os.getgroups()}")
    return "ok"
