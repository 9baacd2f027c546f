"""Live measurements on this machine: real probe subprocesses, real /proc files, real CPU counters."""

import subprocess
import sys
import time

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.errors import ConfigError
from frost_core.measure import (
    Extremities,
    ResourceSampler,
    input_idle_seconds,
    measure_speed,
    parse_pressure,
    probe_share,
    probe_share_blocking,
    read_pressure,
)

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
    assert view.owner_cpu_percent == reading.owner_cpu_percent


def test_sampler_refuses_an_uncalibrated_speed():
    with pytest.raises(ValueError, match="calibrate"):
        ResourceSampler(0.0, list)
