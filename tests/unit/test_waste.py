"""Guest-seconds thrown away, from what the master saw of a copy: placed when, from where, how far by when."""

import pytest

from frost_core.master.waste import (
    REDONE, REFUSED, SUPERSEDED, CopyRun, counted_to, late_reason, overtaken, ran_on, redone, resumed, summary,
)

# Placed at t=100 from progress 0.2, last heard at t=160 at progress 0.5: 60 s for 0.3, so 200 s per unit.
LOST = CopyRun(placed_at=100.0, start=0.2, heard_at=160.0, progress=0.5)


def test_a_replacement_redoes_what_the_lost_copy_did_past_the_checkpoint_it_resumes_from():
    assert redone(LOST, resumed_from=0.4) == pytest.approx(20.0)
    assert redone(LOST, resumed_from=0.5) == 0.0
    assert redone(LOST, resumed_from=0.7) == 0.0                     # resumed past it: nothing redone


def test_a_lost_copy_that_ran_on_threw_away_what_it_did_after_it_was_last_heard():
    assert ran_on(LOST, progress=1.0, now=999.0) == (1.0 - 0.5) * 200  # finished after all: 100 s
    assert ran_on(LOST, progress=0.5, now=999.0) == 0.0


def test_a_copy_that_never_reported_progress_counts_by_the_clock():
    silent = CopyRun(placed_at=100.0, start=0.0, heard_at=101.5, progress=0.0)
    assert redone(silent, resumed_from=0.0) == 1.5                   # placed to last heard
    assert ran_on(silent, progress=0.3, now=110.0) == 8.5            # last heard to the stale report


def test_an_overtaken_copy_threw_away_its_whole_run():
    assert overtaken(LOST, now=130.0) == 30.0


def test_the_summary_names_each_reason():
    assert summary(()) == "no guest work thrown away"
    assert summary((("redone since checkpoint", 12.2), ("superseded copy", 2.0))) == \
        "14 s of guest work thrown away (12 s redone since checkpoint, 2 s superseded copy)"


def test_with_the_guest_s_cpu_time_reported_waste_is_counted_in_cpu_seconds():
    # 60 s of wall time but only 15 CPU-seconds (the owner's programs had the CPU) for 0.3 of progress.
    shared = CopyRun(placed_at=100.0, start=0.2, heard_at=160.0, progress=0.5, cpu_start=0.0, cpu=15.0)
    assert shared.seconds_per_progress() == pytest.approx(50.0)
    assert redone(shared, resumed_from=0.4) == pytest.approx(5.0)
    assert ran_on(shared, progress=1.0, now=999.0) == pytest.approx(25.0)
    assert overtaken(shared, now=300.0) == 15.0
    # A copy adopted mid-run counts from the CPU it had used when the master started following it.
    adopted = CopyRun(placed_at=100.0, start=0.5, heard_at=110.0, progress=0.6, cpu_start=30.0, cpu=34.0)
    assert adopted.seconds_per_progress() == pytest.approx(40.0)


def test_the_copy_s_own_cpu_figures_count_exactly_where_its_host_sent_them():
    shared = CopyRun(placed_at=100.0, start=0.2, heard_at=160.0, progress=0.5, cpu_start=0.0, cpu=15.0)
    # It took the checkpoint the replacement resumes from at 11 CPU-seconds: 15 − 11 = 4 s redone
    # (its rate would say 5 s: its rows are not all as costly).
    assert redone(shared, resumed_from=0.4, cpu_then=11.0) == pytest.approx(4.0)
    # A replacement resuming from before the copy started redoes all of its 15 CPU-seconds.
    assert redone(shared, resumed_from=0.1) == pytest.approx(15.0)
    # Its late result says it used 27 CPU-seconds in all: 12 since it was last heard (its rate: 25).
    assert ran_on(shared, progress=1.0, now=999.0, cpu=27.0) == pytest.approx(12.0)


def test_a_copy_given_up_before_its_first_report_is_settled_by_its_late_figures_as_redone():
    unheard = CopyRun(placed_at=100.0, start=0.2, heard_at=100.0, progress=0.2)
    assert redone(unheard, resumed_from=0.2) == 0.0                     # nothing known yet
    assert overtaken(unheard, now=130.0) == 0.0
    assert ran_on(unheard, progress=1.0, now=999.0, cpu=9.5) == 9.5     # its late result: all it used
    assert late_reason(unheard, REFUSED) == REDONE
    heard = CopyRun(placed_at=100.0, start=0.2, heard_at=101.0, progress=0.3, cpu=1.0)
    assert (late_reason(heard, REFUSED), late_reason(heard, SUPERSEDED)) == (REFUSED, SUPERSEDED)


def test_a_copy_cut_off_just_after_a_checkpoint_past_its_last_report_counts_on_from_that_checkpoint():
    # Last heard at 50 % and 10 CPU-seconds; its replacement resumes from its checkpoint at 60 %, taken at
    # 12.5: nothing is redone, and its late result (20 CPU-seconds) threw away 20 − 12.5 = 7.5, not 10.
    lost = CopyRun(placed_at=100.0, start=0.0, heard_at=120.0, progress=0.5, cpu=10.0)
    assert redone(lost, resumed_from=0.6, cpu_then=12.5) == 0.0
    assert ran_on(resumed(lost, 0.6, 12.5), progress=1.0, now=999.0, cpu=20.0) == pytest.approx(7.5)
    # Without the checkpoint's CPU time its rate stands in: 10 + 0.1 × 20 = 12.
    assert resumed(lost, 0.6).cpu == pytest.approx(12.0)
    assert resumed(lost, 0.4) == lost                                   # resumed from before its last report


def test_late_figures_count_on_from_the_last_one_counted_in_whatever_order_they_come():
    # Counted from 12.5 CPU-seconds (the checkpoint its replacement resumed from). A report sent before
    # the cut (13) arrives with one sent after it (18), in either order, then its final figure (19).
    lost = CopyRun(placed_at=100.0, start=0.0, heard_at=120.0, progress=0.6, cpu=12.5, reported=True)
    for figures in ([(0.62, 13.0), (0.9, 18.0)], [(0.9, 18.0), (0.62, 13.0)]):
        run, total = lost, 0.0
        for progress, cpu in [*figures, (0.95, 19.0)]:
            total += ran_on(run, progress, 999.0, cpu)
            run = counted_to(run, progress, 999.0, cpu)
        assert total == pytest.approx(19.0 - 12.5)
        assert late_reason(run, SUPERSEDED) == SUPERSEDED


def test_a_redone_part_estimated_by_the_clock_is_not_counted_again_by_the_copy_s_late_result():
    # Its reports' CPU figure did not move (0.25 when the master began following it) while its progress did,
    # so what its replacement redoes from the checkpoint (taken at 0.25) is estimated by the clock. Its late
    # result (3.37 CPU-seconds) settles the rest: in all, its CPU time past that checkpoint.
    lost = CopyRun(placed_at=100.0, start=0.0, heard_at=102.0, progress=0.3, cpu_start=0.25, cpu=0.25, reported=True)
    estimate = redone(lost, resumed_from=0.1, cpu_then=0.25)
    assert estimate == pytest.approx(2.0 / 0.3 * 0.2)
    late = ran_on(resumed(lost, 0.1, 0.25, estimate), progress=1.0, now=999.0, cpu=3.37)
    assert estimate + late == pytest.approx(3.37 - 0.25)
