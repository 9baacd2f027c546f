"""Deterministic pictures of every tab and dialog, compared with the stored SVGs.

The state is the fixed demo cluster at a fixed time (the one the screenshots use); the keys
pressed for each picture are in `frost_tui.shots.render.SHOTS` ("3": the Peers tab, "s": the
submit dialog). After an intended change of the UI, regenerate with
`FROST_UPDATE_SNAPSHOTS=1 pytest tests/tui/test_snapshots.py` and look at the SVGs before keeping them.
80x24 is a size owners use (a default terminal, a tmux pane): every screen and dialog is kept at it too.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from frost_tui.shots.fixed import export_shots
from frost_tui.shots.render import SHOTS

SNAPSHOTS = Path(__file__).parent / "snapshots"
# The dialogs the screenshots do not show, with the keys that open them on the demo state.
DIALOGS = (
    ("10-quit", ("q",)),
    ("11-details", ("2", "enter")),
    ("12-cancel", ("4", "c")),
    ("13-evict-at-risk", ("2", "down", "down", "x")),
)


def test_every_screen_matches_its_stored_snapshot():
    check_snapshots(SHOTS, suffix="")


def test_every_screen_matches_its_stored_snapshot_at_80x24():
    check_snapshots(SHOTS, suffix="-80x24", size=(80, 24))


def test_every_dialog_matches_its_stored_snapshot_at_80x24():
    check_snapshots(DIALOGS, suffix="-80x24", size=(80, 24))


def check_snapshots(shots, *, suffix: str, **size) -> None:
    if os.environ.get("NO_COLOR"):
        pytest.skip("NO_COLOR changes every snapshot")
    changed, missing = [], []
    for stem, svg in asyncio.run(export_shots(shots, **size)).items():
        stem += suffix
        path = SNAPSHOTS / f"{stem}.svg"
        if os.environ.get("FROST_UPDATE_SNAPSHOTS"):
            SNAPSHOTS.mkdir(exist_ok=True)
            path.write_text(svg, encoding="utf-8")
        if not path.exists():
            missing.append(stem)  # a picture nobody has looked at is no baseline
        elif svg != path.read_text(encoding="utf-8"):
            changed.append(stem)
    assert missing == [], f"no stored snapshot for {missing}: regenerate with FROST_UPDATE_SNAPSHOTS=1 and look at them"
    assert changed == [], f"these screens changed: {changed}; compare with {SNAPSHOTS}"
