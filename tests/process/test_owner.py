"""The owner comes first: the live node suspends guests when the owner's own work needs the CPU."""

import subprocess
import sys
import time

import pytest

from tests.process.guests import guest_cpu_seconds, guest_processes
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

OWNER_ON = """
[owner]
busy_cpu_percent = 60
input_idle = 0
resume_after = 1
evict_after = 600
evict_hold = 0
"""
HOG = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass\n"


def test_owner_cpu_load_suspends_guests_within_seconds_and_quiet_resumes_them(single_node, tmp_path):
    node = single_node(OWNER_ON)
    wait_for(lambda: node.call("status")["state"] == "idle", timeout=30, what="the first measurement")
    node.cli("submit", "montecarlo-pi", "--param", "samples=1000000000000", "--param", "units=1")
    guests = wait_for(lambda: guest_processes(node.process.pid), timeout=30, what="a guest")
    wait_for(lambda: node.call("status")["state"] == "hosting", timeout=10, what="hosting")
    # The owner starts real work in another session, at normal priority, on every core.
    hogs = [subprocess.Popen([sys.executable, "-c", HOG], start_new_session=True) for _ in range(2)]
    try:
        started = time.monotonic()
        status = wait_for(lambda: (s := node.call("status"))["state"] == "owner-active" and s, timeout=10,
                          what="the owner policy to suspend the guest")
        reaction = time.monotonic() - started
        assert "owner" in status["hosting"]["reason"].lower() or "cpu" in status["hosting"]["reason"].lower()
        assert "suspend" in status["guests"][0]["explanation"]
        before = guest_cpu_seconds(guests)
        time.sleep(1.0)
        assert guest_cpu_seconds(guests) - before < 0.05, "a suspended guest kept using the CPU"
        assert reaction < 6.0, f"reacted only after {reaction:.1f} s"
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    wait_for(lambda: node.call("status")["state"] == "hosting", timeout=20, what="guests resumed after quiet")
    before = guest_cpu_seconds(guests)
    wait_for(lambda: guest_cpu_seconds(guests) > before + 0.2, timeout=10, what="the guest computing again")
