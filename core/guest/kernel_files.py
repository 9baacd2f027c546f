"""Reading the kernel's small files (/proc, cgroupfs) in a few system calls: a warm guest's checks read several per unit."""

from __future__ import annotations

import os


def read_kernel_file(path: str | os.PathLike[str]) -> str:
    """The text of a /proc or cgroup file: open, read to the end, close. `Path.read_text` took three times as
    long (its text layer's buffers and codec lookup), on the event loop, once per unit. Raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode()


_TICKS = os.sysconf("SC_CLK_TCK")


PROC_STAT = os.path.exists("/proc/self/stat")
"""Whether this system has /proc/PID/stat (Linux); elsewhere (macOS, BSD) ask psutil for CPU times."""


def cpu_seconds(pid: int) -> float:
    """The user + system CPU seconds `pid` has used, from /proc/PID/stat (what psutil's `cpu_times` reads, at a
    third of its cost: a guest's CPU is sampled at each progress report and result). Linux only (`PROC_STAT`):
    this module stays free of psutil, which a guest child must not load. Raises OSError."""
    fields = read_kernel_file(f"/proc/{pid}/stat").rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS   # utime and stime: fields 14 and 15 of proc(5)
