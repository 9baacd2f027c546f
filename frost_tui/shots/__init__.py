"""`frost-tui screenshots`: a PNG (and SVG) of every screen, from a fixed demo state or a live cluster."""

from __future__ import annotations

import os
import time
from pathlib import Path

HISTORY_SECONDS = 30.0
"""Seconds of measurements the live pictures' charts show before the ray trace starts (the README's)."""
MIN_HISTORY_SECONDS, MAX_HISTORY_SECONDS = 1.0, 600.0


def render_screenshots(out_dir: Path, *, live: bool = False, dedicated: bool = False,
                       history: float = HISTORY_SECONDS) -> list[Path]:
    """Write an SVG and a PNG of each tab and dialog to `out_dir`; returns the PNG paths.

    `live` takes them from a real cluster started for the purpose (`shots.live`; `dedicated`: its
    desk too on the owner policy `always`; `history`: seconds of charts before the ray trace), else
    from the demo state (`shots.fixed`).
    """
    from frost_tui.shots.render import save_shots

    out_dir.mkdir(parents=True, exist_ok=True)
    os.environ.pop("NO_COLOR", None)  # NO_COLOR would turn every picture grey
    os.environ["TZ"] = "UTC"  # the event times shown, the same on every machine
    if hasattr(time, "tzset"):
        time.tzset()
    if live:
        from frost_tui.shots.live import export_live_shots

        return save_shots(export_live_shots(dedicated=dedicated, history=history), out_dir)
    import asyncio

    from frost_tui.shots.fixed import export_shots

    return save_shots(asyncio.run(export_shots()), out_dir)
