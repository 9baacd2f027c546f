"""Desk rules on a live node: battery, heat, a named program and a schedule window suspend or pick the policy.

Battery and temperature come from psutil reading sysfs as on any laptop: the node runs in a
mount namespace of its own whose /sys/class is a folder the test writes (as the kernel would),
so no hardware is needed and nothing in psutil is faked.
"""

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from frost_core.wire.security import ClusterKey
from tests.nodes import start_node
from tests.process.dbus import mutter_service
from tests.process.guests import guest_cpu_seconds, guest_processes
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

# These tests are about the desk rules, not the owner's CPU: the test machine's own load must
# not suspend the guests, so the owner policy runs as a dedicated server would ("always").
ALWAYS = '\n[owner]\npolicy = "always"\n'
# Guests a desk rule suspended continue after the owner policy's quiet period (30 s by default):
# a second here, so a test that watches them resume stays short.
QUICK_RESUME = '\n[owner]\npolicy = "always"\nresume_after = 1\n'
LONG_JOB = {"samples": 10**12, "units": 1}


@pytest.fixture
def desk_node(tmp_path):
    """One node whose /sys/class is `tmp_path / "sys-class"`; `start(config)` starts it."""
    key = tmp_path / "cluster.key"
    ClusterKey.generate().save(key)
    sys_class = tmp_path / "sys-class"
    (sys_class / "power_supply").mkdir(parents=True)
    (sys_class / "hwmon").mkdir()
    running = []

    def start(extra_config: str = ALWAYS, name: str = "node", **kwargs):
        wrapper = ("unshare", "--mount", "--propagation", "private", "sh", "-c",
                   f'mount --bind "{sys_class}" /sys/class && exec "$@"', "sh")
        running.append(start_node(tmp_path / name, key_file=key, extra_config=extra_config, wrapper=wrapper,
                                  **kwargs))
        return running[-1]

    yield start, sys_class
    for node in running:
        node.stop()


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def desk_lines(node) -> str:
    status = node.call("status")
    return " | ".join([status["hosting"]["reason"], *status["hosting"]["owner"],
                       *(g["explanation"] for g in status["guests"])])


def hosting_guest(node):
    node.call("submit", plugin="montecarlo-pi", params=LONG_JOB)
    guests = wait_for(lambda: guest_processes(node.process.pid), timeout=30, what="a guest")
    wait_for(lambda: node.call("status")["state"] == "hosting", timeout=15, what="hosting")
    return guests


def assert_stopped(guests):
    before = guest_cpu_seconds(guests)
    time.sleep(1.0)
    assert guest_cpu_seconds(guests) - before < 0.05, "a suspended guest kept using the CPU"


def wait_suspended(node, rule: str) -> dict:
    return wait_for(lambda: (s := node.call("status"))["state"] == "owner-active" and rule in desk_lines(node) and s,
                    timeout=10, what=f"the {rule} rule to suspend the guest")


def wait_running(node) -> None:
    """Hosting again, by the node's own account: a guest at SCHED_IDLE may get no CPU at all on a
    loaded test machine, so its CPU time is no measure of whether it was let go."""
    wait_for(lambda: (s := node.call("status"))["state"] == "hosting" and s["guests"]
             and all(g["state"] == "running" for g in s["guests"]), timeout=60, what="guests running again")


def test_unplugging_the_charger_suspends_guests_and_plugging_it_in_resumes_them(desk_node):
    start, sys_class = desk_node
    write(sys_class / "power_supply" / "BAT0" / "capacity", "64\n")
    write(sys_class / "power_supply" / "BAT0" / "status", "Charging\n")
    write(sys_class / "power_supply" / "AC" / "online", "1\n")
    node = start(QUICK_RESUME)
    guests = hosting_guest(node)
    write(sys_class / "power_supply" / "AC" / "online", "0\n")
    write(sys_class / "power_supply" / "BAT0" / "status", "Discharging\n")
    wait_suspended(node, "battery")
    assert "running on battery (64 %) until the charger is plugged in" in desk_lines(node)
    assert_stopped(guests)
    write(sys_class / "power_supply" / "AC" / "online", "1\n")
    wait_running(node)


def test_a_desktop_without_battery_or_sensors_runs_guests_and_says_it_has_no_sensors(desk_node):
    start, _ = desk_node
    node = start()
    guests = hosting_guest(node)
    wait_for(lambda: "no temperature sensors on this machine" in desk_lines(node), timeout=10,
             what="the temperature rule to say there are no sensors")
    assert "battery" not in desk_lines(node)
    assert guests
    wait_running(node)


def test_a_hot_sensor_suspends_guests_until_it_has_cooled_ten_degrees_below_the_limit(desk_node):
    start, sys_class = desk_node
    hwmon = sys_class / "hwmon" / "hwmon0"
    write(hwmon / "name", "coretemp\n")
    write(hwmon / "temp1_label", "Package id 0\n")
    write(hwmon / "temp1_input", "45000\n")
    node = start(QUICK_RESUME + "\n[desk]\nmax_temperature = 70\n")
    guests = hosting_guest(node)
    write(hwmon / "temp1_input", "75000\n")
    wait_suspended(node, "temperature")
    assert "coretemp Package id 0 at 75 °C (limit 70 °C) until it cools below 60 °C" in desk_lines(node)
    assert_stopped(guests)
    write(hwmon / "temp1_input", "65000\n")       # below the limit, not yet 10 °C below: still held
    time.sleep(3)
    assert node.call("status")["state"] == "owner-active"
    write(hwmon / "temp1_input", "55000\n")
    wait_running(node)


def test_a_named_program_suspends_guests_within_seconds_while_it_runs(desk_node, tmp_path):
    start, _ = desk_node
    game = tmp_path / "frostgame"
    shutil.copy(shutil.which("sleep"), game)
    node = start(QUICK_RESUME + '\n[desk]\nprograms = ["frostgame", "zoom"]\n')
    guests = hosting_guest(node)
    program = subprocess.Popen([str(game), "60"])
    try:
        started = time.monotonic()
        wait_suspended(node, "program")
        reaction = time.monotonic() - started
        assert "frostgame running, until it exits" in desk_lines(node)
        assert_stopped(guests)
        print(f"named program -> guests suspended in {reaction:.2f} s")
    finally:
        program.kill()
        program.wait()
    wait_running(node)


def test_a_schedule_window_picks_the_policy_in_force(desk_node, buses, started):
    session, _ = buses
    started(mutter_service(session.address, lambda: 0.0))      # the owner types right now
    start, _ = desk_node
    # idle-only holds guests while the owner types; a window covering every minute picks "always".
    held = start('\n[owner]\npolicy = "idle-only"\n', name="held")
    scheduled = start('\n[owner]\npolicy = "idle-only"\n[desk]\nschedule = { "00:00-24:00" = "always" }\n',
                      name="scheduled")
    for node in (held, scheduled):
        wait_for(lambda node=node: node.call("status")["hosting"]["presence"].startswith("GNOME Mutter IdleMonitor"),
                 timeout=15, what="presence from Mutter")
    wait_for(lambda: "input" in held.call("status")["hosting"]["reason"], timeout=15,
             what="recent input to hold guests under idle-only")
    guests = hosting_guest(scheduled)
    wait_for(lambda: "schedule: window '00:00-24:00' picks the 'always' policy until 00:00" in desk_lines(scheduled),
             timeout=15, what="the schedule's line")
    assert guests
    wait_running(scheduled)


def test_without_a_session_bus_the_node_says_no_presence_source_and_still_runs_work(desk_node, tmp_path):
    start, _ = desk_node
    node = start(env={"DBUS_SESSION_BUS_ADDRESS": "", "DBUS_SYSTEM_BUS_ADDRESS": f"unix:path={tmp_path}/none",
                      "DISPLAY": ""})
    presence = wait_for(lambda: (line := node.call("status")["hosting"]["presence"]) != "not read yet" and line,
                        timeout=15, what="a presence line")
    if tty_or_input_device():
        assert presence.startswith("tty/input access times")
    else:
        assert presence.startswith("no presence source (GNOME Mutter IdleMonitor: ")
        assert "Presence  no presence source" in node.cli("status").stdout
    node.call("submit", plugin="montecarlo-pi", params={"samples": 200000, "units": 2})
    wait_for(lambda: node.call("assignments")[0]["state"] == "done", timeout=60, what="the assignment done")


def tty_or_input_device() -> bool:
    from frost_core.measure.owner_activity import input_idle_seconds
    return input_idle_seconds() is not None


def test_the_cpu_cap_says_in_status_how_much_guests_get(desk_node):
    start, _ = desk_node
    node = start(ALWAYS + "\n[guests]\ncpu_cap_percent = 50\n")
    wait_for(lambda: "cpu-cap: guests together use at most 50 % of one core" in desk_lines(node), timeout=10,
             what="the CPU cap's line")
    assert "Policy    cpu-cap: guests together use at most 50 % of one core" in node.cli("status").stdout


def test_guests_keep_to_the_in_use_cap_while_the_owner_types_and_get_more_once_they_leave(desk_node, buses, started):
    session, _ = buses
    idle = {"seconds": 0.0}                                     # the owner types right now
    started(mutter_service(session.address, lambda: idle["seconds"]))
    start, _ = desk_node
    # "always": the test machine's own load must not suspend the guests (see ALWAYS); the cap is the subject.
    node = start(ALWAYS + "\n[guests]\ncpu_cap_in_use_percent = 25\n")
    wait_for(lambda: node.call("status")["hosting"]["presence"].startswith("GNOME Mutter IdleMonitor"), timeout=15,
             what="presence from Mutter")
    node.call("submit", plugin="montecarlo-pi", params={"samples": 10**12, "units": 2})
    guests = wait_for(lambda: len(found := guest_processes(node.process.pid)) == 2 and found, timeout=30,
                      what="two guests")
    wait_for(lambda: "input 0 s ago: guests together use at most 25 % of one core" in desk_lines(node), timeout=10,
             what="the in-use cap's line")
    assert guests_cpu_quota(guests[0]) == 25                    # a quarter of one core, for both guests together
    before, began = guest_cpu_seconds(guests), time.monotonic()
    time.sleep(3.0)
    used = (guest_cpu_seconds(guests) - before) / (time.monotonic() - began)
    assert used < 0.25 * 1.2, f"two guests used {used:.2f} of a core while the owner typed (cap 0.25)"
    idle["seconds"] = 600.0                                     # the owner went for lunch
    wait_for(lambda: "no input for 600 s: guests together have no cap" in desk_lines(node), timeout=10,
             what="the cap lifted")
    wait_for(lambda: guests_cpu_quota(guests[0]) is None, timeout=5, what="the guests' quota lifted in their cgroup")
    idle["seconds"] = 0.0                                       # and came back
    wait_for(lambda: guests_cpu_quota(guests[0]) == 25, timeout=10, what="the in-use cap back in the cgroup")


def test_guests_beyond_the_in_use_memory_pool_leave_when_the_owner_comes_back_and_return_once_they_go(
        desk_node, buses, started):
    session, _ = buses
    idle = {"seconds": 600.0}                                   # the owner is away
    started(mutter_service(session.address, lambda: idle["seconds"]))
    start, _ = desk_node
    # "always": the test machine's own load must not suspend the guests (see ALWAYS); the memory pool is the subject.
    node = start(ALWAYS + "\n[guests]\nmemory_pool_in_use_mb = 20\n")  # one 16 MiB Monte Carlo unit, not two
    wait_for(lambda: node.call("status")["hosting"]["presence"].startswith("GNOME Mutter IdleMonitor"), timeout=15,
             what="presence from Mutter")
    assignment_id = node.call("submit", plugin="montecarlo-pi", params={"samples": 10**12, "units": 2})["id"]

    def units():
        return node.call("assignment", assignment=assignment_id)["units"]

    wait_for(lambda: [u["state"] for u in units()] == ["running"] * 2 and all(u["progress"] > 0 for u in units()),
             timeout=60, what="both units under way while the owner is away")
    idle["seconds"] = 0.0                                       # the owner sits down
    wait_for(lambda: sorted(u["state"] for u in units()) == ["queued", "running"], timeout=20,
             what="one unit sent back to the queue")
    wait_for(lambda: len(guest_processes(node.process.pid)) == 1, timeout=10, what="one guest process left")
    status = node.call("status")
    assert status["hosting"]["memory_pool_bytes"] == 20 << 20
    assert "guests together hold at most 20 MiB (guests.memory_pool_in_use_mb)" in desk_lines(node)
    (queued,) = [u for u in units() if u["state"] == "queued"]
    assert queued["progress"] > 0, "the unit sent away lost its progress"
    time.sleep(3.0)                                             # the pool holds: it is not placed here again
    assert sorted(u["state"] for u in units()) == ["queued", "running"]
    idle["seconds"] = 600.0                                     # the owner leaves
    wait_for(lambda: [u["state"] for u in units()] == ["running"] * 2, timeout=30,
             what="the queued unit placed again once the whole pool is back")
    assert node.call("status")["hosting"]["memory_pool_bytes"] > 20 << 20


def guests_cpu_quota(guest) -> float | None:
    """The CPU quota of the guests' parent cgroup, in percent of one core, as the kernel holds it; None: none."""
    for line in Path(f"/proc/{guest.pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":                                   # the unified hierarchy (v2)
            quota, period = (Path("/sys/fs/cgroup") / path.lstrip("/")).parent.joinpath("cpu.max").read_text().split()
            return None if quota == "max" else 100 * int(quota) / int(period)
        if "cpu" in controllers.split(","):
            parent = (Path("/sys/fs/cgroup") / controllers / path.lstrip("/")).parent
            quota = int(parent.joinpath("cpu.cfs_quota_us").read_text())
            return None if quota < 0 else 100 * quota / int(parent.joinpath("cpu.cfs_period_us").read_text())
    raise AssertionError(f"guest {guest.pid} is in no cpu cgroup")
