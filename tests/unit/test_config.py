"""Configuration: defaults, validation errors that name the key, saving, documentation."""

from pathlib import Path

import pytest

from frost_core.config import (
    OPTIONS, Paths, describe_options, load_config, option_named, save_config, waiting_for_restart,
)
from frost_core.api.errors import ConfigError
from frost_core.policies.views import PolicySettings


def paths_for(tmp_path: Path, text: str | None = None) -> Paths:
    config_file = tmp_path / "config.toml"
    if text is not None:
        config_file.write_text(text)
    return Paths.resolve(config_file=config_file, data_dir=tmp_path / "data")


def test_missing_file_gives_every_default(tmp_path):
    config = load_config(paths_for(tmp_path))
    assert all(config.get(o.name) == o.default for o in OPTIONS)
    assert config.paths.log_dir == tmp_path / "data" / "logs"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[node]\nport = 'x'\n", "node.port must be an integer"),
        ("[node]\nport = 70000\n", "node.port must be between 0 and 65535"),
        ("[guests]\ncpu = 2\n", "unknown option 'guests.cpu' (did you mean 'cpus'?)"),
        ("[gossp]\nfanout = 2\n", "unknown section [gossp] (did you mean 'gossip'?)"),
        ("[node]\nseeds = ['10.0.0.1']\n", "node.seeds: '10.0.0.1' is not HOST:PORT"),
        ("[node]\nseeds = ['desk..lan:47631']\n", "node.seeds: 'desk..lan:47631' does not start with an IP address"),
        ("[control]\nhosts = ['[::1]:47631', '.desk:47631']\n", "control.hosts: '.desk:47631' does not start with"),
        ("[node]\nadvertise_host = 'desk..lan'\n",
         "node.advertise_host must be an IP address or a host name, not 'desk..lan'"),
        ("[log]\nlevel = 'loud'\n", "log.level must be one of debug, info, warning, error"),
        ("[cluster]\nallow_cluster_plugins = 1\n", "cluster.allow_cluster_plugins must be true or false"),
        ("[checkpoints]\nmin_interval = 100\nmax_interval = 50\n", "checkpoints.min_interval must not exceed"),
        ("[gang]\ncheck_interval = -5\n", "gang.check_interval must be between 0 and 86400"),
        ("[gang]\ncheck_supersteps = 2.5\n", "gang.check_supersteps must be an integer"),
        ("[gang]\ncheck_every = 10\n", "unknown option 'gang.check_every' (did you mean 'check_interval'?)"),
        ("[node\n", "not valid TOML"),
    ],
)
def test_bad_values_are_refused_with_the_key_named(tmp_path, text, named):
    with pytest.raises(ConfigError) as caught:
        load_config(paths_for(tmp_path, text))
    assert named in caught.value.message


def test_save_then_load_round_trips_changed_options_only(tmp_path):
    paths = paths_for(tmp_path)
    config = load_config(paths).replace(guests__cpus=2, node__seeds=["127.0.0.1:4000"], owner__evict_after=5)
    save_config(config)
    text = paths.config_file.read_text()
    assert "[guests]\ncpus = 2" in text and "port" not in text
    again = load_config(paths)
    assert again.values == config.values
    assert again.seeds == (("127.0.0.1", 4000),)


def test_ints_are_accepted_where_numbers_are_expected(tmp_path):
    config = load_config(paths_for(tmp_path, "[gossip]\ninterval = 2\n"))
    assert config.get("gossip.interval") == 2.0 and isinstance(config.get("gossip.interval"), float)


def test_every_option_is_documented_in_docs():
    documented = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    assert describe_options() in documented, "regenerate docs/configuration.md with `frost-tui config`"


def test_desk_schedule_is_a_table_of_windows_and_policies_saved_back_as_written(tmp_path):
    paths = paths_for(tmp_path, '[desk]\nschedule = { "Mon-Fri 09:00-17:00" = "idle-only", "22:00-07:00" = "always" }\n')
    config = load_config(paths)
    assert config.get("desk.schedule") == {"Mon-Fri 09:00-17:00": "idle-only", "22:00-07:00": "always"}
    save_config(config)
    assert load_config(paths).values == config.values


@pytest.mark.parametrize("table, complaint", [
    ('{ "Mon-Fry 09:00-17:00" = "always" }', "unknown day"),
    ('{ "09:00-17:00" = "sometimes" }', "use one of share, idle-only, always"),
    ('["09:00-17:00"]', "must be a table of strings"),
])
def test_desk_schedule_errors_name_the_window(tmp_path, table, complaint):
    with pytest.raises(ConfigError, match=complaint):
        load_config(paths_for(tmp_path, f"[desk]\nschedule = {table}\n"))


def test_saving_edited_options_keeps_comments_other_keys_and_leaves_flags_out(tmp_path):
    paths = paths_for(tmp_path, "# my desk: keep guests small\n[guests]\ncpus = 1  # one core only\n\n"
                                "[gossip]\n# fast on this LAN\ninterval = 0.5\n")
    running = load_config(paths, {"node.port": 4711, "node.seeds": ["10.0.0.2:47700"]})  # this run's flags
    save_config(running.replace(guests__memory_pool_mb=512, gossip__interval=0.7),
                names=["guests.memory_pool_mb", "gossip.interval"])
    text = paths.config_file.read_text()
    assert "# my desk: keep guests small" in text and "cpus = 1  # one core only" in text
    assert "# fast on this LAN" in text and "interval = 0.7" in text and "memory_pool_mb = 512" in text
    assert "4711" not in text and "seeds" not in text, "command-line flags are not settings"
    assert load_config(paths).get("guests.cpus") == 1


@pytest.mark.parametrize("name", ['desk "one"', "two\nlines", "bell\x1b[31mred", "back\\slash", "tab\there"])
def test_any_node_name_reads_back_exactly_as_saved(tmp_path, name):
    paths = paths_for(tmp_path)
    save_config(load_config(paths).replace(node__name=name), names=["node.name"])
    assert load_config(paths).get("node.name") == name


def test_the_balancer_policy_knobs_come_from_the_cluster_section_with_todays_defaults(tmp_path):
    assert PolicySettings.from_config(load_config(paths_for(tmp_path))) == PolicySettings()
    tuned = load_config(paths_for(tmp_path, "[cluster]\nbalance_band = 0.4\nmin_stay = 60\n"
                                             "destination_candidates = 3\n"))
    assert PolicySettings.from_config(tuned) == PolicySettings(band=0.4, min_stay=60.0, candidates=3)


def test_a_relative_data_dir_is_taken_from_where_the_node_was_started(tmp_path, monkeypatch):
    """Guests start inside the data dir from another working directory: a relative one made every unit fail."""
    monkeypatch.chdir(tmp_path)
    paths = Paths.resolve(config_file=Path("config.toml"), data_dir=Path("desk"))
    assert paths.data_dir == tmp_path / "desk" and paths.log_dir == tmp_path / "desk" / "logs"
    assert paths.config_file == tmp_path / "config.toml"


def test_a_gangs_check_cadence_defaults_to_every_two_minutes_and_is_the_owners_to_set(tmp_path):
    assert load_config(paths_for(tmp_path, "")).get("gang.check_interval") == 120.0
    config = load_config(paths_for(tmp_path, "[gang]\ncheck_interval = 5\ncheck_supersteps = 20\n"))
    assert (config.get("gang.check_interval"), config.get("gang.check_supersteps")) == (5.0, 20)


def test_a_save_says_which_options_wait_for_a_restart_and_of_what():
    assert waiting_for_restart(["guests.cpus", "owner.policy"]) == ""      # the running node applies these now
    assert waiting_for_restart(["node.port"]) == "node.port takes effect when the node starts again"
    assert waiting_for_restart(["gossip.interval", "node.port", "control.hosts", "guests.cpus"]) == (
        "gossip.interval and node.port take effect when the node starts again; "
        "control.hosts takes effect when the UI starts again")
    assert waiting_for_restart(["node.stop_handoff"]) == ""               # read as the node stops


def test_an_unknown_option_is_named_with_the_closest_real_one(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown option 'guests.cpu' \(did you mean 'guests.cpus'\?\)"):
        option_named("guests.cpu")
    with pytest.raises(ConfigError, match="unknown option 'owner.polcy'"):
        load_config(Paths(tmp_path / "c.toml", tmp_path, tmp_path)).replace(owner__polcy="always")
