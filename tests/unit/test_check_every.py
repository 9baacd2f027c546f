"""`submit --check-every`: the cadence a submitter writes, and a clear error for what it cannot be."""

import pytest

from frost_core.api.errors import ConfigError
from frost_tui.check_every import parse_check_every


@pytest.mark.parametrize(("text", "cadence"), [
    ("10s", (10.0, 0)),
    ("2m", (120.0, 0)),
    ("1.5h", (5400.0, 0)),
    ("45", (45.0, 0)),                   # plain seconds
    ("50 supersteps", (0.0, 50)),
    ("50steps", (0.0, 50)),
    ("30s, 1 step", (30.0, 1)),          # whichever comes first
    ("OFF", (0.0, 0)),
])
def test_a_check_cadence_is_a_time_a_count_of_supersteps_or_both(text, cadence):
    assert parse_check_every(text) == cadence


@pytest.mark.parametrize(("text", "complaint"), [
    ("", "expected a time such as 10s"),
    ("0s", "expected a time such as 10s"),
    ("-5s", "expected a time such as 10s"),
    ("10 fortnights", "expected a time such as 10s"),
    ("2.5 supersteps", "whole numbers"),
])
def test_a_bad_check_cadence_says_what_it_expects(text, complaint):
    with pytest.raises(ConfigError) as caught:
        parse_check_every(text)
    assert complaint in caught.value.message and caught.value.title == "Bad check cadence"
