"""The Assignments tab's result panel (what an assignment threw away, and why, next to its result) and its
window on a long sweep's units."""

from __future__ import annotations

from rich.console import Console

import dataclasses

from frost_core import AssignmentView, UnitView
from frost_tui.tabs.assignments import UNIT_ROWS, describe_result, unit_window


def panel_text(assignment: AssignmentView) -> str:
    console = Console(width=200, record=True)
    console.print(describe_result(assignment))
    return console.export_text()


def done(**waste) -> AssignmentView:
    return AssignmentView(
        id="abababab-1", plugin="raytrace", state="done", progress=1.0, created_at=0.0, finished_at=90.0,
        eta_seconds=None, params={"width": 64}, units=(), result_media_type="image/png",
        result_filename="raytrace.png", result_path="/tmp/raytrace.png", error=None,
        wasted_seconds=sum(waste.values()), waste={k.replace("_", " "): v for k, v in waste.items()},
    )


def test_the_result_panel_names_the_work_thrown_away_and_why():
    text = panel_text(done(redone_since_checkpoint=12.2, superseded_copy=2.0))
    assert "Wasted  14s of guest work thrown away: 12s redone since checkpoint, 2s superseded copy" in text


def test_an_assignment_that_threw_nothing_away_says_nothing_about_it():
    assert "Wasted" not in panel_text(done())


def sweep(units: int, finished: int) -> tuple[UnitView, ...]:
    return tuple(UnitView(index=i, task_id=f"abababab-1.{i}", state="done" if i < finished else "queued", host="",
                          progress=1.0 if i < finished else 0.0, moves=0, failures=0, error=None) for i in range(units))


def test_a_long_sweep_shows_a_window_of_units_from_the_first_not_done():
    # 10,000 units: the table shows UNIT_ROWS (200) of them, however many exist, following the sweep.
    assert unit_window(sweep(10_000, finished=0)) == (0, UNIT_ROWS)
    assert unit_window(sweep(10_000, finished=1_200)) == (1_200, 1_200 + UNIT_ROWS)
    assert unit_window(sweep(10_000, finished=9_950)) == (10_000 - UNIT_ROWS, 10_000)   # the last ones, never fewer
    assert unit_window(sweep(10_000, finished=10_000)) == (10_000 - UNIT_ROWS, 10_000)
    assert unit_window(sweep(50, finished=20)) == (0, 50)
    running = dataclasses.replace(done(), state="running", units=sweep(10_000, finished=1_200))
    assert "Units  1,201–1,400 of 10,000 shown, from the first not done" in panel_text(running)
    assert "Units " not in panel_text(dataclasses.replace(running, units=sweep(50, finished=20)))
