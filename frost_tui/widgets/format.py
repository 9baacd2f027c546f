"""Pure functions that turn node figures into short, fixed-width text for tables and panes."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.text import Text

BAR_FULL = "█"
BAR_EMPTY = "░"


def format_bytes(count: float) -> str:
    """Binary units, three significant figures: 512 B, 1.5 KiB, 3.2 GiB."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.3g} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_duration(seconds: float | None) -> str:
    """Compact durations as an owner reads them on a clock: 42s, 3m05s, 2h07m, 3d04h."""
    if seconds is None:
        return "—"
    total = max(0, int(round(seconds)))
    if total < 60:
        return f"{total}s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def format_ago(then: float, now: float) -> str:
    """How long ago a wall-clock time was, e.g. '3s ago'."""
    return f"{format_duration(now - then)} ago"


def format_clock(at: float) -> str:
    """Local wall-clock time of day, HH:MM:SS."""
    return time.strftime("%H:%M:%S", time.localtime(at))


SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None], top: float) -> str:
    """A character per value, its height a share of `top` (btop's and nvtop's small graphs): ▁ for nothing, █ for
    `top` or more, a blank where there is no value (nobody was looking then)."""
    steps = len(SPARKS) - 1
    return "".join(" " if value is None else SPARKS[0] if top <= 0 else
                   SPARKS[min(steps, max(0, round(value / top * steps)))] for value in values)


def progress_bar(fraction: float, width: int = 12) -> Text:
    """A text progress bar with its percentage, so a table cell can hold one."""
    fraction = min(1.0, max(0.0, fraction))
    filled = int(round(fraction * width))
    bar = Text(BAR_FULL * filled, style="green")
    bar.append(BAR_EMPTY * (width - filled), style="bright_black")
    bar.append(f" {fraction * 100:3.0f}%")
    return bar


def styled_state(state: str) -> Text:
    """A state word coloured by how much it needs the owner's attention."""
    style = STATE_STYLES.get(state, "")
    return Text(state, style=style)


STATE_STYLES = {
    "alive": "green",
    "running": "green",
    "hosting": "green",
    "done": "green",
    "suspect": "bold yellow",
    "quarantined": "bold red",
    "paused": "yellow",
    "suspended": "yellow",
    "queued": "bright_black",
    "idle": "bright_black",
    "checkpointing": "cyan",
    "starting": "cyan",
    "evicting": "bold magenta",
    "finishing": "cyan",
    "owner-active": "yellow",
    "dead": "bold red",
    "left": "bright_black",
    "failed": "bold red",
    "cancelled": "bright_black",
    "stopped": "bright_black",
    "error": "bold red",
    "warning": "yellow",
    "info": "",
}
