"""The ledger's pure parts and its SQLite book: signed summaries, decayed usage, views, reciprocity."""

from __future__ import annotations

import dataclasses
import math
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.api.errors import AuthenticationError, ProtocolError
from frost_core.ledger.book import Ledger, RunsInHour, given_run, received_run
from frost_core.ledger.service import VIEW_REFRESH, VIEW_SHARE, refresh_pause
from frost_core.ledger.signing import NodeKey
from frost_core.ledger.stats import ledger_view
from frost_core.ledger.summary import (
    MAX_BODY_BYTES, TOP_PEERS, TOP_SUBMITTERS, SignedSummary, build_summary, open_summary, sign_summary,
)
from frost_core.policies.reciprocity import credited_usage, submitter_node
from frost_core.wire.codec import decode_strict, encode
from frost_tui import stats

HOUR, DAY = 3600.0, 86400.0
NOW = 1_800_000_000.0


def _key(tmp_path, name="a") -> NodeKey:
    return NodeKey.load_or_create(tmp_path / f"{name}.key")


def _summary(node_id="a" * 32, given=10.0):
    return build_summary(node_id, NOW, 2.0, {"b" * 32: (given, 1.0)}, [("alice@" + "b" * 32, given, NOW - HOUR)])


def test_a_signed_summary_opens_to_what_was_signed(tmp_path):
    key = _key(tmp_path)
    summary = _summary()
    assert open_summary(sign_summary(key, summary), None) == summary
    assert open_summary(sign_summary(key, summary), key.public) == summary


def test_an_altered_summary_is_rejected(tmp_path):
    signed = sign_summary(_key(tmp_path), _summary(given=10.0))
    plain = decode_strict(signed.body)
    plain["given"] = 10_000.0    # inflate what the node gave
    altered = dataclasses.replace(signed, body=encode(plain))
    with pytest.raises(AuthenticationError):
        open_summary(altered, None)


@pytest.mark.parametrize("field", ["issued_at", "speed", "given"])
def test_a_summary_with_a_figure_that_is_not_a_number_is_malformed(tmp_path, field):
    # Signed by its own node (a buggy one): a NaN time stored as NULL broke the ledger's NOT NULL column.
    summary = dataclasses.replace(_summary(), **{field: math.nan})
    with pytest.raises(ProtocolError, match="negative or non-finite figure"):
        open_summary(sign_summary(_key(tmp_path), summary), None)


def test_a_summary_signed_by_another_key_is_rejected_as_a_forgery(tmp_path):
    owner, forger = _key(tmp_path, "owner"), _key(tmp_path, "forger")
    forged = sign_summary(forger, _summary(given=10_000.0))    # valid signature, wrong signer for node "a…"
    assert open_summary(forged, None).given == 10_000.0        # (first contact would take any key…)
    with pytest.raises(AuthenticationError):
        open_summary(forged, owner.public)                      # …so peers pin the first one they saw


def test_the_node_key_survives_a_restart_and_refuses_loose_permissions(tmp_path):
    path = tmp_path / "node.key"
    assert NodeKey.load_or_create(path).public == NodeKey.load_or_create(path).public
    path.chmod(0o644)
    with pytest.raises(Exception, match="readable by its owner only"):
        NodeKey.load_or_create(path)


def test_a_summary_stays_bounded_however_long_the_history(tmp_path):
    peers = {f"{i:032x}": (float(i), 1.0) for i in range(200)}
    runs = [(f"user{i % 50}@x", 1.0, NOW - i * 600.0) for i in range(5000)]
    summary = build_summary("a" * 32, NOW, 1.0, peers, runs)
    assert len(summary.peers) == TOP_PEERS and len(summary.usage) == TOP_SUBMITTERS
    assert summary.given == pytest.approx(sum(g for g, _ in peers.values()))   # totals still count every peer
    assert len(sign_summary(_key(tmp_path), summary).body) < MAX_BODY_BYTES
    # no submitter's usage is lost to the buckets: the older records fold into one
    assert sum(cpu for _, cpu in summary.usage[0].buckets) == pytest.approx(100.0)


def test_decayed_usage_adds_own_runs_and_verified_peers_summaries(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite", node_id="a" * 32)
    try:
        # 100 CPU-seconds at speed 2 one half-life ago: 200 normalised, halved -> 100
        ledger.record([given_run(master="m" * 32, submitter="bob@m", task_id="t/0", epoch=1, cpu_seconds=100.0,
                                 speed=2.0, at=NOW - DAY)])
        peer_key = _key(tmp_path, "peer")
        peer = build_summary("p" * 32, NOW, 1.0, {"m" * 32: (40.0, 0.0)}, [("bob@m", 40.0, NOW)])
        assert ledger.accept(sign_summary(peer_key, peer)) == peer
        assert ledger.decayed_usage("bob@m", NOW, DAY) == pytest.approx(100.0 + 40.0, rel=1e-3)
        assert ledger.decayed_usage("carol@m", NOW, DAY) == 0.0
        # the same summary again is not news; an older one never replaces it
        assert ledger.accept(sign_summary(peer_key, peer)) is None
        # a forged summary for that peer (another key) is refused and changes nothing
        forged = build_summary("p" * 32, NOW + 1, 1.0, {}, [("bob@m", 1e6, NOW)])
        with pytest.raises(AuthenticationError):
            ledger.accept(sign_summary(_key(tmp_path, "forger"), forged))
        assert ledger.decayed_usage("bob@m", NOW, DAY) == pytest.approx(140.0, rel=1e-3)
    finally:
        ledger.close()


def test_a_result_delivered_twice_is_received_once(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite", node_id="a" * 32)
    try:
        assert ledger.record([received_run(host="h", submitter="s", task_id="t/0", epoch=2, cpu_seconds=5.0, speed=1.0, at=NOW)]) == 1
        assert ledger.record([received_run(host="h", submitter="s", task_id="t/0", epoch=2, cpu_seconds=5.0, speed=1.0, at=NOW + 1)]) == 0
        assert [r.cpu_seconds for r in ledger.runs()] == [5.0]
    finally:
        ledger.close()


def test_a_burst_of_runs_is_written_in_one_transaction_and_writing_it_again_adds_nothing(tmp_path):
    """A master accepting hundreds of results a second writes them together; a batch interrupted by a
    shutdown is written again at close, and must not count twice."""
    ledger = Ledger(tmp_path / "ledger.sqlite", node_id="a" * 32)
    try:
        burst = [received_run(host="h", submitter="s", task_id=f"t.{i}", epoch=1, cpu_seconds=0.5, speed=1.0, at=NOW)
                 for i in range(200)]
        assert ledger.record(burst) == 200
        assert ledger.record(burst) == 0
        assert sum(r.cpu_seconds for r in ledger.runs()) == pytest.approx(100.0)
    finally:
        ledger.close()


def test_the_view_splits_given_and_received_per_peer_and_per_day(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite", node_id="a" * 32)
    try:
        ledger.record([given_run(master="m", submitter="s", task_id="t/0", epoch=1, cpu_seconds=10.0, speed=1.5,
                                 at=NOW - DAY),
                       given_run(master="m", submitter="s", task_id="t/1", epoch=1, cpu_seconds=4.0, speed=1.5, at=NOW)])
        ledger.record([received_run(host="h", submitter="s", task_id="u/0", epoch=1, cpu_seconds=3.0, speed=1.0, at=NOW)])
        view = ledger_view(ledger.read(since=NOW - 2 * DAY, now=NOW, speed=1.5).hours, [], ledger.summary(NOW, 1.5),
                           now=NOW, since=NOW - 2 * DAY, name_of=str.upper)
        assert (view.given, view.received) == pytest.approx((21.0, 3.0))
        assert [(p.name, p.given, p.received) for p in view.peers] == [("M", 21.0, 0.0), ("H", 0.0, 3.0)]
        assert [d.given for d in view.days] == pytest.approx([15.0, 6.0])
        assert view.history[-1] == pytest.approx(6.0) and view.history[-25] == pytest.approx(15.0)   # hourly, 48 h
        assert view.contributors[0].given == pytest.approx(21.0)
        later = ledger.read(since=NOW - HOUR, now=NOW, speed=1.5)
        assert ledger_view(later.hours, [], later.own, now=NOW, since=NOW - HOUR, name_of=str.upper).given == 6.0
    finally:
        ledger.close()


def test_this_nodes_own_units_run_here_are_its_own_row_marked_me_in_the_stats(tmp_path):
    """A node that ran its own units gave them and received them: that row is itself, not a peer (before, `stats`
    listed it as PEER 'desk-a' beside the others, and it led the top contributors under a name like theirs)."""
    me = "a" * 32
    ledger = Ledger(tmp_path / "ledger.sqlite", node_id=me)
    try:
        ledger.record([given_run(master=me, submitter="s", task_id="t/0", epoch=1, cpu_seconds=60.0, speed=1.0, at=NOW),
                       given_run(master="m" * 32, submitter="s", task_id="u/0", epoch=1, cpu_seconds=6.0, speed=1.0,
                                 at=NOW),
                       received_run(host=me, submitter="s", task_id="t/0", epoch=1, cpu_seconds=60.0, speed=1.0,
                                    at=NOW)])
        names = {me: "desk-a", "m" * 32: "desk-m"}
        view = ledger_view(ledger.read(since=0.0, now=NOW, speed=1.0).hours, [], ledger.summary(NOW, 1.0),
                           now=NOW, since=0.0, name_of=names.__getitem__)
    finally:
        ledger.close()
    assert [(p.name, p.is_self) for p in view.peers] == [("desk-a", True), ("desk-m", False)]
    assert [(c.name, c.is_self) for c in view.contributors] == [("desk-a", True)]
    text = stats.as_text(view)
    assert "\ndesk-a (me)  1.0 min  1.0 min\ndesk-m       6.0 s    0.0 s\n" in text   # the peers table


def _sql_steps_of_a_rebuild(folder: Path, runs: int) -> tuple[int, int]:
    """SQLite VM steps of one rebuild's reads and of one summary signed for an exchange, after `runs` runs in the
    same 48 hours with the same peers and submitters."""
    def both_sides(i: int):
        peer, submitter, at = f"{i % 4}" * 32, f"s{i % 3}@m", NOW - 48 * HOUR * i / runs
        yield given_run(master=peer, submitter=submitter, task_id=f"t.{i}", epoch=1, cpu_seconds=0.5, speed=1.0, at=at)
        yield received_run(host=peer, submitter=submitter, task_id=f"t.{i}", epoch=1, cpu_seconds=0.5, speed=1.0, at=at)

    ledger = Ledger(folder / f"{runs}.sqlite", node_id="a" * 32)
    try:
        ledger.record([run for i in range(runs) for run in both_sides(i)])
        steps = [0]

        def step() -> int:
            steps[0] += 1
            return 0

        ledger._db.set_progress_handler(step, 1)
        ledger.read(since=NOW - 30 * DAY, now=NOW, speed=1.0)
        rebuild, steps[0] = steps[0], 0
        ledger.summary(NOW, 1.0)
        return rebuild, steps[0]
    finally:
        ledger.close()


def test_a_rebuild_and_a_signed_summary_cost_the_hours_with_runs_not_the_runs(tmp_path):
    """The runs are never deleted, and one node's 100,000-unit sweep writes 200,000 of them in minutes: every
    rebuild of the ledger's figures and every summary signed for a peer's exchange read them all (0.4 s and 0.2 s
    at 200,000 runs). They read the hourly sums the ledger keeps as it writes; the hour a screen's window starts
    in is the one read run by run (none here). Read run by run, 20 times the runs took 20 times the steps."""
    few, many = _sql_steps_of_a_rebuild(tmp_path, 1_000), _sql_steps_of_a_rebuild(tmp_path, 20_000)
    assert many[0] <= few[0] * 1.01 and many[1] <= few[1] * 1.01, f"{few} steps at 1,000 runs, {many} at 20,000"


def _without_the_sums(ledger: Ledger, path: Path) -> Ledger:
    """The ledger as a node from before its hourly sums left it (its runs alone), opened again."""
    ledger.close()
    db = sqlite3.connect(path)
    db.executescript("DROP TRIGGER run_summed; DROP TABLE run_hours;")
    db.close()
    return Ledger(path, node_id=ledger.node_id)


runs_of_a_month = st.lists(st.tuples(st.sampled_from(["given", "received"]), st.sampled_from(["p" * 32, "q" * 32]),
                                     st.sampled_from(["alice@a", "bob@b"]), st.floats(0.001, 500.0),
                                     st.sampled_from([0.5, 1.0, 2.5]), st.floats(0.0, 40 * DAY)), max_size=60)


@settings(max_examples=60, deadline=None)
@given(runs_of_a_month, st.sampled_from([0.0, 3.0]), st.floats(0.0, 40 * DAY), st.booleans())
def test_the_summary_and_the_screen_summed_an_hour_at_a_time_are_those_summed_run_by_run(runs, peer_speed, window,
                                                                                       before_the_sums):
    """The node's summary, fair share's records and the ledger's screen are read from sums per peer, submitter
    and hour that the ledger keeps as it writes the runs (a 100,000-unit sweep's 200,000 runs took seconds of
    Python at every rebuild): they say what a sum over every run says, the summary's older usage at its CPU-weighted
    mean time, a peer's runs at the speed its summary states, the screen's window from any instant (its first
    hour read run by run). A ledger written before the sums were kept (`before_the_sums`) is summed when opened."""
    with tempfile.TemporaryDirectory() as folder:
        ledger = Ledger(Path(folder) / "ledger.sqlite", node_id="a" * 32)
        try:
            ledger.record([(given_run(master=peer, submitter=submitter, task_id=f"t.{i}", epoch=1, cpu_seconds=cpu,
                                      speed=speed, at=NOW - ago) if direction == "given" else
                            received_run(host=peer, submitter=submitter, task_id=f"t.{i}", epoch=1, cpu_seconds=cpu,
                                         speed=speed, at=NOW - ago))
                           for i, (direction, peer, submitter, cpu, speed, ago) in enumerate(runs)])
            if peer_speed:
                ledger.accept(sign_summary(_key(Path(folder), "p"), dataclasses.replace(_summary("p" * 32),
                                                                                          speed=peer_speed)))
            if before_the_sums:
                ledger = _without_the_sums(ledger, Path(folder) / "ledger.sqlite")
            every = ledger.runs()
            since = NOW - window
            reading = ledger.read(since=since, now=NOW, speed=1.5)
            own, records = reading.own, reading.usage
            screen = ledger_view(reading.hours, [], own, now=NOW, since=since, name_of=str)
        finally:
            ledger.close()
    peers: dict[str, tuple[float, float]] = {}
    for run in every:
        given_, received = peers.get(run.peer, (0.0, 0.0))
        peers[run.peer] = (given_ + run.normalised, received) if run.direction == "given" else (
            given_, received + run.normalised)
    oracle = build_summary("a" * 32, NOW, 1.5, peers, [(r.submitter, r.normalised, r.at) for r in every
                                                      if r.direction == "given"])
    assert (own.given, own.received) == pytest.approx((oracle.given, oracle.received))
    assert [p.peer for p in own.peers] == [p.peer for p in oracle.peers]
    assert [x for p in own.peers for x in (p.given, p.received)] == pytest.approx(
        [x for p in oracle.peers for x in (p.given, p.received)])
    assert [u.submitter for u in own.usage] == [u.submitter for u in oracle.usage]
    for ours, theirs in zip(own.usage, oracle.usage):
        assert [at for at, _ in ours.buckets] == pytest.approx([at for at, _ in theirs.buckets], abs=1e-3)
        assert [cpu for _, cpu in ours.buckets] == pytest.approx([cpu for _, cpu in theirs.buckets])
    for submitter, hours in records.items():   # this host's runs, and what the peers' summaries say they gave
        given_to = [r.normalised for r in every if r.direction == "given" and r.submitter == submitter]
        given_to += [cpu for s in reading.summaries for u in s.usage if u.submitter == submitter for _, cpu in u.buckets]
        assert sum(cpu for _, cpu in hours) == pytest.approx(sum(given_to))
    each = ledger_view([RunsInHour(r.direction, r.peer, r.normalised, r.at) for r in every], [], own, now=NOW,
                       since=since, name_of=str)
    assert (screen.given, screen.received) == pytest.approx((each.given, each.received))
    assert [p.node_id for p in screen.peers] == [p.node_id for p in each.peers]
    assert [x for p in screen.peers for x in (p.given, p.received)] == pytest.approx(
        [x for p in each.peers for x in (p.given, p.received)])
    assert [d.day for d in screen.days] == [d.day for d in each.days]
    assert [x for d in screen.days for x in (d.given, d.received)] == pytest.approx(
        [x for d in each.days for x in (d.given, d.received)])
    assert screen.history == pytest.approx(each.history)


def test_reciprocity_credits_what_a_node_gave_beyond_what_it_took():
    assert submitter_node("alice@" + "a" * 32) == "a" * 32
    assert credited_usage(3600.0, 10800.0) == 0.0            # gave 3 h net, used 1 h: ranks with newcomers
    assert credited_usage(3600.0, 1800.0) == 1800.0          # gave half an hour net: half its usage counts
    assert credited_usage(3600.0, -5000.0) == 3600.0         # only takes: its usage as it is


def test_signed_summaries_travel_in_a_ledger_exchange(tmp_path):
    from frost_core.ledger.exchange import LedgerExchange
    from frost_core.wire.messages import decode_message, encode_message

    signed = sign_summary(_key(tmp_path), _summary())
    message = LedgerExchange((signed,))
    back = decode_message(LedgerExchange.CODE, encode_message(message))
    assert back == message and isinstance(back.summaries[0], SignedSummary)


def test_rebuilding_the_view_of_a_long_ledger_takes_a_bounded_share_of_the_node():
    assert refresh_pause(0.005) == VIEW_REFRESH   # a short ledger: the UI's view follows within 2 s
    for rebuild in (0.1, 0.5, 3.0):   # tens of thousands of runs: rebuilt less often, never more than 2 % of the time
        assert rebuild / (rebuild + refresh_pause(rebuild)) <= VIEW_SHARE
