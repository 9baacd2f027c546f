"""`submit --check-every`: the cadence a submitter writes, and a clear error for what it cannot be."""

import pytest

from frost_core.api.errors import ConfigError
from frost_tui.check_every import parse_check_every


@pytest.mark.parametrize(("text", "cadence"), [
    ("10s", (10.0, 0, False)),
    ("2m", (120.0, 0, False)),
    ("1.5h", (5400.0, 0, False)),
    ("45", (45.0, 0, False)),                   # plain seconds
    ("50 supersteps", (0.0, 50, False)),
    ("50steps", (0.0, 50, False)),
    ("30s, 1 step", (30.0, 1, False)),          # whichever comes first
    ("OFF", (0.0, 0, False)),
    ("2s,forced", (2.0, 0, True)),       # every check restarts the gang on the best p
    ("forced, 10 steps", (0.0, 10, True)),
])
def test_a_check_cadence_is_a_time_a_count_of_supersteps_or_both(text, cadence):
    assert parse_check_every(text) == cadence


@pytest.mark.parametrize(("text", "complaint"), [
    ("", "expected a time such as 10s"),
    ("0s", "expected a time such as 10s"),
    ("-5s", "expected a time such as 10s"),
    ("10 fortnights", "expected a time such as 10s"),
    ("2.5 supersteps", "whole numbers"),
    ("forced", "forced checks need a time or a count"),
])
def test_a_bad_check_cadence_says_what_it_expects(text, complaint):
    with pytest.raises(ConfigError) as caught:
        parse_check_every(text)
    assert complaint in caught.value.message and caught.value.title == "Bad check cadence"
