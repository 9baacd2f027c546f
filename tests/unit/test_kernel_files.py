"""The kernel's small files read in a few system calls: whole, as text, an error for one that is gone, a CPU time."""

from __future__ import annotations

import os

import psutil
import pytest

from frost_core.guest.kernel_files import cpu_seconds, read_kernel_file


def test_a_file_is_read_whole_even_past_one_read(tmp_path):
    listing = "".join(f"{pid}\n" for pid in range(40_000))   # (a mountinfo on a container host can pass 64 KiB)
    (tmp_path / "cgroup.procs").write_text(listing)
    assert read_kernel_file(tmp_path / "cgroup.procs") == listing


def test_a_proc_file_reads_as_its_text_and_a_gone_one_raises():
    assert read_kernel_file(f"/proc/{os.getpid()}/stat").startswith(f"{os.getpid()} (")
    with pytest.raises(OSError):
        read_kernel_file("/proc/0/autogroup")


def test_a_processes_cpu_seconds_are_what_psutil_reads():
    sum(range(2_000_000))   # some CPU of our own
    before = psutil.Process().cpu_times()
    used = cpu_seconds(os.getpid())
    after = psutil.Process().cpu_times()
    # (to the kernel's tick: psutil adds user and system as floats, so 307.67 + 8.97 may read 316.64000000000004)
    assert round(before.user + before.system, 2) <= used <= round(after.user + after.system, 2) and used > 0
