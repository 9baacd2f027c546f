"""The Assignments tab's result panel: what an assignment threw away, and why, next to its result."""

from __future__ import annotations

from rich.console import Console

from frost_core import AssignmentView
from frost_tui.tabs.assignments import describe_result


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
