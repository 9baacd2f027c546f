"""Live measurements on this machine: real probe subprocesses, real /proc files, real CPU counters."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.api.errors import ConfigError
from frost_core.measure import (
    Extremities,
    ResourceSampler,
    input_idle_seconds,
    load_or_measure,
    measure_extremities,
    measure_speed,
    parse_pressure,
    probe_share,
    probe_share_blocking,
    read_pressure,
)
from frost_core.measure import probe as probe_module
from frost_core.measure.processes import Attribution, read_processes
from tests.waiting import wait_for

PSI = "some avg10=1.50 avg60=0.75 avg300=0.10 total=12345\nfull avg10=0.25 avg60=0.00 avg300=0.00 total=99\n"
SPIN = "import time\nend = time.time() + {0}\nwhile time.time() < end: pass\n"


def test_pressure_file_is_parsed():
    p = parse_pressure(PSI)
    assert (p.some_avg10, p.some_avg60, p.full_avg10, p.full_avg60) == (1.5, 0.75, 0.25, 0.0)
    cpu_only = parse_pressure(PSI.splitlines()[0])
    assert cpu_only.full_avg10 is None


def test_missing_or_broken_pressure_reads_as_unknown(tmp_path):
    assert read_pressure("memory", tmp_path) is None
    (tmp_path / "memory").write_text("some avg10=oops\n")
    assert read_pressure("memory", tmp_path) is None


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_pressure_parser_refuses_garbage_with_value_error_only(text):
    try:
        parse_pressure(text)
    except ValueError:
        pass


def test_input_idle_is_unknown_or_a_duration():
    idle = input_idle_seconds()
    assert idle is None or idle >= 0


async def test_probe_runs_at_guest_priority_and_reports_a_share():
    share = await probe_share(0.05)
    assert 0.0 <= share <= 1.0
    with pytest.raises(ValueError, match="between 0 and 10"):
        await probe_share(0)


def test_blocking_probe_for_calibration():
    assert 0.0 <= probe_share_blocking(0.05) <= 1.0


def test_speed_and_extremities_file(tmp_path):
    assert measure_speed(seconds=0.02, rounds=1) > 0
    path = tmp_path / "extremities.json"
    saved = Extremities(speed=1.2, cpus=4, idle=4.8, heavy=0.1, measured_at=time.time())
    saved.save(path)
    assert Extremities.load(path) == saved
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="measure them again"):
        Extremities.load(path)


def test_a_torn_extremities_file_is_measured_again_rather_than_refused(tmp_path, caplog):
    # As a power cut during the first run's save could leave it: the node must still start.
    path = tmp_path / "extremities.json"
    path.write_text('{"speed": 1.')
    measured = load_or_measure(path)
    assert measured.idle > measured.heavy >= 0 and Extremities.load(path) == measured
    assert "measuring them again" in caplog.text


class _TextualLikeStderr:
    """What a running Textual app puts in sys.stderr: writable, but with no real descriptor."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return -1


def test_extremities_are_measured_inside_a_textual_app(monkeypatch):
    """The first run on a machine measures them while the UI holds stderr; that once crashed the node."""
    monkeypatch.setattr(sys, "stderr", _TextualLikeStderr())
    extremities = measure_extremities(seconds=0.2)
    assert extremities.idle > extremities.heavy >= 0


async def test_sampler_counts_guest_processes_as_guests_not_owner():
    spinner = subprocess.Popen([sys.executable, "-c", SPIN.format(3)], start_new_session=True)
    try:
        sampler = ResourceSampler(1.0, lambda: [spinner.pid], window=3)
        await trio.sleep(0.1)
        await sampler.sample()
        await trio.sleep(0.6)
        reading = await sampler.sample()
    finally:
        spinner.kill()
        spinner.wait()
    assert reading.guest_cpu_percent > 5          # the spinner's CPU is booked as a guest's
    assert 0.0 <= reading.available <= sampler.cpus * sampler.speed
    assert reading.owner_cpu_percent >= 0
    view = reading.owner_view()
    assert view.cpu_share == reading.cpu_share


async def test_a_probe_that_cannot_run_leaves_the_reading_without_one(tmp_path, monkeypatch, caplog):
    broken = tmp_path / "probe_child.py"
    broken.write_text("raise SystemExit(3)\n")   # as a child that could not start its loop
    monkeypatch.setattr(probe_module, "PROBE_CHILD", broken)
    sampler = ResourceSampler(1.0, list, window=3)
    reading = await sampler.sample()
    assert 0.0 <= reading.available <= sampler.cpus * sampler.speed
    assert "the guest-priority probe failed" in caplog.text


def test_sampler_refuses_an_uncalibrated_speed():
    with pytest.raises(ValueError, match="calibrate"):
        ResourceSampler(0.0, list)


def _measure_cli(data_dir, cache, *extra):
    from tests.nodes import FROST_TUI

    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "config.toml").touch()  # --config must name a file that exists
    return subprocess.run([FROST_TUI, "measure", "--data-dir", str(data_dir), "--config", str(data_dir / "config.toml"),
                           *extra], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "XDG_CACHE_HOME": str(cache)})


def test_measure_without_a_node_saves_fresh_extremities(tmp_path):
    cache = tmp_path / "cache"
    done = _measure_cli(tmp_path / "data", cache, "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)["result"]
    saved = Extremities.load(cache / "frost-tui" / "extremities.json")
    assert shown["idle"] == saved.idle and shown["measured_at"] == saved.measured_at
    assert saved.speed > 0 and 0 <= saved.heavy <= saved.idle * 1.5   # a busy machine never offers much more


@pytest.mark.slow
def test_measure_with_a_running_node_makes_it_measure_and_use_the_figures(tmp_path):
    from frost_core.wire.security import ClusterKey
    from tests.nodes import start_node

    cache = tmp_path / "cache"
    key = tmp_path / "cluster.key"
    ClusterKey.generate().save(key)
    node = start_node(tmp_path / "node", key_file=key, env={"XDG_CACHE_HOME": str(cache)})
    try:
        saved = cache / "frost-tui" / "extremities.json"
        deadline = time.monotonic() + 60
        while not saved.exists() and time.monotonic() < deadline:   # the node measures on its first start
            time.sleep(0.2)
        first = Extremities.load(saved)
        done = _measure_cli(node.data_dir, cache)
        assert done.returncode == 0, done.stderr
        assert "the running node uses them from now on" in done.stdout
        assert Extremities.load(saved).measured_at > first.measured_at
        assert node.process.poll() is None
    finally:
        node.stop()


BURN = "import time\nwhile time.process_time() < {0}: pass\n"


def test_a_child_that_ran_and_exited_between_two_readings_is_not_the_owner():
    # A probe or plugin check that starts and exits within one interval: its CPU reaches the node
    # only through the parent's reaped-children time, and once counted as the owner's.
    attribution = Attribution()
    subprocess.run([sys.executable, "-c", BURN.format(0.4)], check=True)
    taken = attribution.take()
    assert taken.node >= 0.35, taken


def test_a_nice_19_program_outside_the_node_is_not_the_owner(tmp_path):
    # Another node's guest or BOINC: nice 19, not our child (the shell that started it is gone).
    done = tmp_path / "done"
    script = BURN.format(0.6) + f"open({str(done)!r}, 'w').close()\nimport time\ntime.sleep(30)\n"
    attribution = Attribution()
    subprocess.run(["sh", "-c", f"nice -n 19 {sys.executable} -c \"$0\" >/dev/null 2>&1 &", script], check=True)
    try:
        wait_for(done.exists, timeout=15, what="the nice-19 program to burn its CPU")
        taken = attribution.take()
        assert taken.idle_priority >= 0.5, taken
        assert taken.node < 0.3, taken
        counted = Attribution(count_idle_priority=True)
        assert counted.take().idle_priority == 0.0      # owner.count_idle_priority: they count as the owner's
    finally:
        for stat in read_processes().processes.values():
            if stat.nice == 19 and stat.ppid != os.getpid():
                try:
                    cmdline = (Path("/proc") / str(stat.pid) / "cmdline").read_bytes()
                except OSError:
                    continue
                if str(done).encode() in cmdline:
                    os.kill(stat.pid, signal.SIGKILL)
