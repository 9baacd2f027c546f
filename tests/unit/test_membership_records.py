"""The pure rules of membership: merging records, refutation, the 5 % push rule, timeouts, digests, wire checks."""

import dataclasses
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.api.errors import AuthenticationError, ConfigError, ProtocolError, WrongClusterKey
from frost_core.membership.config import MembershipConfig
from frost_core.membership.service import Membership
from frost_core.membership.messages import PushPull, ResourceUpdate, entry_from_record, record_from_entry
from frost_core.membership.news import full_sync_interval, news_rounds
from frost_core.membership.records import (
    MemberState,
    NodeRecord,
    ResourceFigures,
    add_suspicion,
    figures_moved,
    merge_records,
    refute,
)
from frost_core.membership.suspicion import death_settle, suspicion_timeout
from frost_core.membership.table import MemberTable, digest_key, pack_digest_item, parse_digest
from frost_core.wire.messages import decode_message, encode_message

ALIVE, SUSPECT, DEAD, LEFT = MemberState.ALIVE, MemberState.SUSPECT, MemberState.DEAD, MemberState.LEFT


def record(node_id="a" * 32, incarnation=0, state=ALIVE, version=0, available=1.0, **extra) -> NodeRecord:
    return NodeRecord(
        node_id=node_id,
        name="desk",
        address=("10.0.0.1", 7946),
        protocol_version=1,
        incarnation=incarnation,
        state=state,
        figures=ResourceFigures(available=available, cpus=4),
        figures_version=version,
        **extra,
    )


@pytest.mark.parametrize(
    ("local", "remote", "wins"),
    [
        # higher incarnation wins whole, even alive over dead
        ((3, DEAD, 0), (4, ALIVE, 0), "remote"),
        ((4, ALIVE, 0), (3, DEAD, 9), "local"),
        # equal incarnation: suspect > alive, dead > suspect, left > dead
        ((2, ALIVE, 0), (2, SUSPECT, 0), "remote"),
        ((2, SUSPECT, 0), (2, ALIVE, 0), "local"),
        ((2, SUSPECT, 0), (2, DEAD, 0), "remote"),
        ((2, DEAD, 0), (2, LEFT, 0), "remote"),
        ((2, LEFT, 0), (2, DEAD, 0), "local"),
        # equal incarnation and state: the newer figures win
        ((2, ALIVE, 5), (2, ALIVE, 6), "remote"),
        ((2, ALIVE, 6), (2, ALIVE, 5), "local"),
    ],
)
def test_merge_follows_incarnation_then_state_then_figures(local, remote, wins):
    mine = record(incarnation=local[0], state=local[1], version=local[2], available=1.0)
    theirs = record(incarnation=remote[0], state=remote[1], version=remote[2], available=2.0)
    merged = merge_records(mine, theirs, now=10.0)
    if wins == "local":
        assert merged is None
    else:
        assert merged is not None
        assert (merged.incarnation, merged.state, merged.figures_version) == remote
        assert merged.updated_at == 10.0


def test_merge_keeps_fresher_figures_and_stronger_state_independently():
    mine = record(incarnation=1, state=SUSPECT, version=9, available=9.0, suspectors=("x",), state_since=5.0)
    theirs = record(incarnation=1, state=ALIVE, version=3, available=3.0)
    assert merge_records(mine, theirs, now=10.0) is None
    newer_figures = record(incarnation=1, state=ALIVE, version=10, available=4.0)
    merged = merge_records(mine, newer_figures, now=10.0)
    assert merged.state == SUSPECT and merged.figures.available == 4.0


def test_a_death_the_node_itself_contradicted_since_is_only_a_suspicion_here():
    # We heard from it at 9.0; a peer declared it dead at 6.0 (a healed partition's verdict): a suspicion, from now.
    heard_since = record(incarnation=2, state=ALIVE, heard_at=9.0)
    merged = merge_records(heard_since, record(incarnation=2, state=DEAD, state_since=6.0), now=10.0)
    assert (merged.state, merged.state_since) == (SUSPECT, 10.0)
    # Heard last before it was declared dead (a crash): dead here too, at once, as before.
    heard_before = record(incarnation=2, state=ALIVE, heard_at=5.0)
    assert merge_records(heard_before, record(incarnation=2, state=DEAD, state_since=6.0), now=10.0).state == DEAD
    # A goodbye is never doubted.
    assert merge_records(heard_since, record(incarnation=2, state=LEFT, state_since=6.0), now=10.0).state == LEFT


def test_suspicions_of_the_same_incarnation_add_up_and_keep_the_earliest_start():
    a = record(incarnation=1, state=SUSPECT, suspectors=("p",), state_since=8.0)
    b = record(incarnation=1, state=SUSPECT, suspectors=("q",), state_since=5.0)
    merged = merge_records(a, b, now=10.0)
    assert merged.suspectors == ("p", "q") and merged.state_since == 5.0
    assert merge_records(merged, b, now=11.0) is None


def test_add_suspicion_starts_then_confirms():
    alive = record()
    suspect = add_suspicion(alive, "p", now=3.0)
    assert suspect.state == SUSPECT and suspect.suspectors == ("p",) and suspect.state_since == 3.0
    assert add_suspicion(suspect, "p", now=4.0) is suspect
    assert add_suspicion(suspect, "q", now=4.0).suspectors == ("p", "q")


@pytest.mark.parametrize(
    ("heard", "refutes"),
    [
        (dict(incarnation=2, state=SUSPECT), True),  # suspected now: outbid
        (dict(incarnation=2, state=DEAD), True),
        (dict(incarnation=5, state=ALIVE), True),  # a previous life of ours (we restarted)
        (dict(incarnation=2, state=ALIVE, version=9), True),
        (dict(incarnation=1, state=DEAD), False),  # already refuted
        (dict(incarnation=2, state=ALIVE), False),  # our own news coming back
    ],
)
def test_refute_outbids_bad_news_about_ourselves(heard, refutes):
    own = record(incarnation=2, version=3)
    answer = refute(own, record(**heard), now=1.0)
    if not refutes:
        assert answer is None
        return
    assert answer.state == ALIVE
    assert answer.incarnation > heard["incarnation"]
    # the answer wins against the rumour wherever the two meet
    assert merge_records(record(**heard), answer, now=2.0).state == ALIVE


@pytest.mark.parametrize(
    ("old", "new", "moved"),
    [(1.0, 1.04, False), (1.0, 1.05, True), (1.0, 0.95, True), (2.0, 1.95, False), (0.0, 0.0, False), (0.0, 0.1, True)],
)
def test_push_only_on_a_five_percent_move(old, new, moved):
    assert figures_moved(ResourceFigures(available=old), ResourceFigures(available=new), 0.05) is moved


def test_suspicion_timeout_scales_with_log_n_and_shrinks_with_confirmations():
    config = MembershipConfig(
        probe_interval=1.0, probe_timeout=0.5, suspicion_multiplier=4.0, suspicion_max_multiplier=6.0, suspicion_min=1.0
    )
    # floor = 4 × log10(1000) × 1 s = 12 s; ceiling = 6 × 12 = 72 s; K = 3
    assert suspicion_timeout(1000, 3, config) == pytest.approx(12.0)
    assert suspicion_timeout(1000, 0, config) == pytest.approx(72.0)
    # one confirmation: 72 − 60 × log 2 / log 4 = 42 s
    assert suspicion_timeout(1000, 1, config) == pytest.approx(42.0)
    assert suspicion_timeout(100, 3, config) == pytest.approx(8.0)
    # two members: nobody can confirm, so the floor applies at once; here log10 2 × 4 s < 1 s minimum
    assert suspicion_timeout(2, 0, config) == pytest.approx(1.204, abs=1e-3)


@pytest.mark.parametrize("size", [2, 5, 50, 100])
def test_default_suspicion_outlasts_a_ten_second_stall(size):
    assert suspicion_timeout(size, 3, MembershipConfig()) == pytest.approx(10.0)


def test_a_death_settles_over_two_stretched_probe_rounds_less_the_suspicion_it_outlived():
    config = MembershipConfig(probe_interval=1.0, probe_timeout=0.5, suspicion_multiplier=4.0, suspicion_min=2.0)
    # each probe stretched up to (8 + 1) × 1 s = 9 s; two rounds over 3 peers = 54 s; the first death
    # came at least max(2, 4 × log10 4 × 1 s = 2.41 s) after its suspicion: 51.59 s
    assert death_settle(3, config) == pytest.approx(54 - 4 * math.log10(4))
    # a bigger cluster probes each member less often: 2 × 30 × 9 s − 4 × log10 31 s = 534.03 s
    assert death_settle(30, config) == pytest.approx(540 - 4 * math.log10(31))
    # the defaults, three nodes: 2 × 3 × 2.25 s − 10 s = 3.5 s
    assert death_settle(3, MembershipConfig()) == pytest.approx(3.5)
    # a long suspicion covers the rounds: one stretched probe interval is still left, 9 s
    assert death_settle(1, MembershipConfig(probe_interval=1.0, probe_timeout=0.5, suspicion_min=60.0)) == 9.0


def test_config_names_the_bad_value():
    with pytest.raises(ConfigError, match="fanout"):
        MembershipConfig(fanout=0)
    with pytest.raises(ConfigError, match="probe_timeout"):
        MembershipConfig(probe_interval=0.1, probe_timeout=0.2)


def _ids(n: int) -> list[str]:
    rng = random.Random(n)
    return [f"{rng.getrandbits(128):032x}" for _ in range(n)]


def test_digest_exchange_moves_exactly_the_differences():
    ids = _ids(6)
    a = MemberTable(record(ids[0]))
    b = MemberTable(record(ids[1]))
    for node_id in ids[2:4]:
        a.put(record(node_id, version=1))
        b.put(record(node_id, version=1))
    a.put(record(ids[4], version=2))  # only a knows
    b.put(record(ids[5]))  # only b knows
    b.put(record(ids[2], version=5))  # b is fresher
    a.put(record(ids[3], incarnation=1, state=SUSPECT, suspectors=("z",)))  # a is fresher
    send, wants = b.compare(a.digest())
    assert {r.node_id for r in send} == {ids[1], ids[5], ids[2]}
    assert {r.node_id for r in a.wanted(wants)} == {ids[0], ids[4], ids[3]}
    for r in send:
        a.merge(r, now=1.0)
    for r in a.wanted(wants):
        b.merge(r, now=1.0)
    assert a.digest() and sorted(a.digest()) == sorted(b.digest())
    assert b.compare(a.digest()) == ([], b"")


def test_a_table_that_drops_its_peers_knows_only_itself_and_offers_nobody_the_old_cluster():
    ids = _ids(4)
    table = MemberTable(record(ids[0]))
    table.put(record(ids[1]))
    table.put(record(ids[2], incarnation=1, state=SUSPECT, suspectors=("z",)))
    table.put(record(ids[3], state=DEAD))
    assert table.drop_peers() == 3
    assert [r.node_id for r in table.records()] == [ids[0]]
    assert table.active_peers() == [] and not table.suspects and table.forget(older_than=math.inf) == []
    # its digest says only itself: a peer of the new cluster is asked for nothing of the old one
    newcomer = MemberTable(record(ids[1]))
    send, wants = newcomer.compare(table.digest())
    assert [r.node_id for r in table.wanted(wants)] == [ids[0]]
    table.put(record(ids[1]))   # the new cluster's members come in as usual
    assert [r.node_id for r in table.active_peers()] == [ids[1]]


def test_an_exchange_of_news_costs_what_changed_not_the_table():
    # two tables of 1,000 agreeing records, long since spread (changed at time 0)
    ids = _ids(1002)
    a, b = MemberTable(record(ids[0])), MemberTable(record(ids[1]))
    for node_id in ids:
        a.put(record(node_id))
        b.put(record(node_id))
    a.put(record(ids[2], version=1, updated_at=100.0))  # news at a
    b.put(record(ids[3], version=1, updated_at=101.0))  # news at b
    b.put(record(ids[4], version=2, updated_at=102.0))  # news at both, b fresher
    a.put(record(ids[4], version=1, updated_at=99.0))
    news = a.digest(since=90.0)
    assert set(parse_digest(news)) == {digest_key(ids[4]), digest_key(ids[2])}
    assert len(news) <= 2 * 10
    send, wants = b.compare(news, since=90.0)
    # b sends its news a did not name and the fresher record a named; it wants a's news
    assert {r.node_id for r in send} == {ids[3], ids[4]}
    assert [r.node_id for r in a.wanted(wants)] == [ids[2]]
    # a whole-table digest is still about ten bytes a member, and finds the same differences
    full_send, full_wants = b.compare(a.digest(), since=None)
    assert len(a.digest()) > 9 * 1000
    assert {r.node_id for r in full_send} == {ids[3], ids[4]} and full_wants == wants


def test_a_table_with_no_news_offers_an_empty_digest_and_forgets_only_the_long_dead():
    ids = _ids(4)
    table = MemberTable(record(ids[0]))
    table.put(record(ids[1], updated_at=5.0))
    table.put(record(ids[2], state=DEAD, state_since=5.0, updated_at=6.0))
    table.put(record(ids[3], state=LEFT, state_since=50.0, updated_at=50.0))
    assert table.digest(since=60.0) == b""
    assert [r.node_id for r in table.changed_since(6.0)] == [ids[3], ids[2]]
    assert [r.node_id for r in table.forget(older_than=10.0)] == [ids[2]]
    assert table.get(ids[3]) is not None and table.active_peer_count() == 1


def test_random_peers_are_uniform_and_never_the_excluded():
    ids = _ids(5)
    table = MemberTable(record(ids[0]))
    for node_id in ids[1:]:
        table.put(record(node_id))
    rng = random.Random(1)
    counts = dict.fromkeys(ids[2:], 0)
    for _ in range(3000):
        for peer in table.random_peers(2, rng, exclude=(ids[1],)):
            counts[peer.node_id] += 1
    assert set(counts) == set(ids[2:]) and all(1800 < c < 2200 for c in counts.values())  # 2,000 each expected


@pytest.mark.parametrize(
    ("size", "rounds", "interval"),
    [
        (10, 4, 30.0),  # 2 + ceil(ln 10 / ln 5) = 2 + 2; at most 32 members the base interval
        (100, 5, 90.0),  # 2 + ceil(2.86); ceil(log2 100 - 5) + 1 = 3
        (1000, 7, 180.0),  # 2 + ceil(4.29); ceil(4.97) + 1 = 6
        (5000, 8, 270.0),  # 2 + ceil(5.29); ceil(7.29) + 1 = 9
    ],
)
def test_news_lasts_about_log_n_rounds_and_whole_tables_travel_log_n_times_less_often(size, rounds, interval):
    assert news_rounds(size, fanout=2) == rounds
    assert full_sync_interval(size, base=30.0) == interval


@pytest.mark.parametrize(
    ("digest", "problem"),
    [
        (b"x", "ends inside"),
        (b"\x00" * 17, "ends inside"),
        (b"k" * 6 + b"\x00\x50\x00", "state byte"),  # state 5
        (b"k" * 6 + b"\x00\x09\x00", "state byte"),  # nine suspectors
        (b"k" * 6 + b"\xff" * 6, "over 5 bytes"),
        (b"k" * 6 + b"\xff\xff\xff\xff\x7f\x00\x00", "out of range"),
        (b"k" * 6 + b"\x80\x00\x00\x00", "minimally"),
        (b"k" * 6 + b"\x00\x00\x00" + b"k" * 6 + b"\x01\x00\x00", "twice"),
    ],
)
def test_a_bad_digest_is_a_protocol_error_naming_the_problem(digest, problem):
    with pytest.raises(ProtocolError, match=problem):
        MemberTable(record()).compare(digest)


def test_a_digest_costs_about_ten_bytes_a_member():
    table = MemberTable(record(_ids(1)[0]))
    for n, node_id in enumerate(_ids(100)[1:]):
        table.put(record(node_id, incarnation=n % 3, version=200 + n))
    assert len(table.digest()) <= 10 * len(table)
    assert parse_digest(table.digest())[digest_key(table.own_id)] == (0, 0, 0, 0)


def test_entries_survive_the_wire_with_their_suspicion_age():
    original = record(incarnation=3, state=SUSPECT, version=7, suspectors=("p", "q"), state_since=4.0)
    message = PushPull(sender=entry_from_record(original, now=10.0), digest=b"")
    decoded = decode_message(message.CODE, encode_message(message))
    back = record_from_entry(decoded.sender, now=100.0)
    assert back.state_since == pytest.approx(94.0)  # six seconds old, on our clock
    assert dataclasses.replace(back, state_since=4.0, updated_at=0.0) == original


def test_a_record_is_small_on_the_wire_and_its_figures_rounded_sensibly():
    figures = ResourceFigures(available=0.87349, idle_extremity=4.0, cpus=4, free_memory=(8 << 30) + 12345, guests=2)
    original = dataclasses.replace(record(version=70000), figures=figures)
    entry = entry_from_record(original, now=3600.0)
    message = ResourceUpdate(entries=(entry,))
    body = encode_message(message)
    assert len(body) < 100  # as a map with field names, one record took about 250
    back = record_from_entry(decode_message(message.CODE, body).entries[0], now=3600.0)
    assert back.figures == dataclasses.replace(figures, available=0.873, free_memory=8 << 30)


_POSITIONS = {"node_id": 0, "name": 1, "host": 2, "port": 3, "incarnation": 5, "state": 6, "state_age": 8,
              "suspectors": 10}
_FIGURES = {"available": 0, "idle_extremity": 1, "cpus": 3, "free_memory": 4, "mode": 6}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("node_id", ""),
        ("host", "desk..lan"),
        ("host", "a" * 64 + ".lan"),
        ("port", 0),
        ("incarnation", -1),
        ("incarnation", 2**40),
        ("state", 9),
        ("state_age", -1),
        ("state_age", 10**7),
        ("available", 10**16),
        ("idle_extremity", -(10**16)),
        ("cpus", -1),
        ("free_memory", 2**50),
        ("mode", "m" * 40),
        ("suspectors", ("s",) * 9),
        ("name", "n" * 500),
    ],
)
def test_bad_entries_are_refused_with_the_field_named(field, value):
    entry = list(entry_from_record(record(), now=0.0))
    if field in _FIGURES:
        figures = list(entry[9])
        figures[_FIGURES[field]] = value
        entry[9] = tuple(figures)
    else:
        entry[_POSITIONS[field]] = value
    with pytest.raises(ProtocolError, match=field):
        record_from_entry(tuple(entry), now=0.0)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_any_digest_bytes_parse_or_are_refused_with_a_reason(data: bytes):
    try:
        items = parse_digest(data)
    except ProtocolError:
        return
    # what parses re-packs to the same bytes: every item was minimal and whole
    assert b"".join(pack_digest_item(key, *version) for key, version in items.items()) == data


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.binary(min_size=6, max_size=6),
            st.integers(0, 2**32 - 1),
            st.integers(0, 3),
            st.integers(0, 8),
            st.integers(0, 2**32 - 1),
        ),
        max_size=20,
        unique_by=lambda item: item[0],
    )
)
def test_digest_items_round_trip(items):
    packed = b"".join(pack_digest_item(*item) for item in items)
    assert parse_digest(packed) == {key: tuple(rest) for key, *rest in items}


def test_only_another_cluster_key_is_a_refusal_the_owner_hears_of():
    # A replayed or garbled datagram is no one's to mend: it must not read "not let into the cluster" with the
    # remedy for another key. Another key is told once per address.
    told: list[tuple[tuple[str, int], str]] = []
    membership = Membership(node_id="a" * 32, name="desk", address=("10.0.0.1", 7946), rng=random.Random(1),
                            on_refused=lambda address, reason: told.append((address, reason)))
    membership.report_bad_input(("10.0.0.2", 7946), AuthenticationError("datagram counter 7 was already seen (replay)"))
    membership.report_bad_input(("10.0.0.3", 7946), ProtocolError("datagram format version 9 is not ours (1)"))
    assert told == []
    membership.report_bad_input(("10.0.0.4", 7946), WrongClusterKey("datagram MAC does not match our cluster key"))
    membership.report_bad_input(("10.0.0.4", 7946), WrongClusterKey("datagram MAC does not match our cluster key"))
    assert told == [(("10.0.0.4", 7946), "datagram MAC does not match our cluster key")]
