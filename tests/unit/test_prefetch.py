"""Units placed ahead and guest processes started ahead: how many, by a host's guest CPUs."""

import pytest

from frost_core.config import Paths, load_config
from frost_core.guest.views import GuestSettings
from frost_core.policies.prefetch import MAX_SPARES, spares_for, units_held, worth_placing_ahead


@pytest.mark.parametrize("cpus, spares", [
    (0, 1),    # no CPU figure yet: still one, as before spares went by CPUs
    (1, 1),
    (2, 2),    # both of an assignment's first units start in a waiting process
    (4, 4),
    (64, MAX_SPARES),   # 15 MiB each: a big machine keeps a few, not one per core
])
def test_one_spare_per_guest_cpu_up_to_the_cap(cpus, spares):
    assert spares_for(cpus) == spares


def test_guest_settings_take_the_spares_from_the_guest_cpus(tmp_path):
    paths = Paths(config_file=tmp_path / "config.toml", data_dir=tmp_path, log_dir=tmp_path)
    assert GuestSettings.from_config(load_config(paths, {"guests.cpus": 2})).spares == 2
    assert GuestSettings.from_config(load_config(paths, {"guests.cpus": 0})).spares >= 1   # 0: all of them


def test_units_go_ahead_once_results_show_they_are_short():
    # 2 CPUs: each runs one unit and holds one ahead.
    assert units_held(2) == 4
    assert not worth_placing_ahead(None)
    assert worth_placing_ahead(0.01)
    assert not worth_placing_ahead(5.0)
