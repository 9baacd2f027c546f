"""How a screenshot is taken and saved, for the fixed demo state and the live cluster alike.

One size and one list of key presses, so both sets of pictures show the same screens; SVGs are
exported by Textual and PNGs converted with cairosvg, with the SVG's web font replaced by an
installed monospace font (DejaVu Sans Mono) so the columns line up.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.app import App
    from textual.pilot import Pilot

SIZE = (132, 40)
MONOSPACE_FONT = "DejaVu Sans Mono"
BRAILLE_FONT = "DejaVu Sans"
SETTLE_TRIES = 10
"""Exports after the first, 50 ms apart, a shot waits at most for two in a row to agree."""
_BRAILLE_TEXT = re.compile(r"<text [^>]*>[\u2800-\u28ff]+</text>")

# (file stem, keys to press after start-up) for each picture
SHOTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("1-machine", ()),
    ("2-guests", ("2",)),
    ("3-peers", ("3",)),
    ("4-assignments", ("4",)),
    ("5-plugins", ("5", "down", "down", "down")),
    ("6-events", ("6",)),
    ("7-settings", ("7",)),
    ("8-ledger", ("8",)),
    ("9-submit", ("s",)),
    ("10-help", ("question_mark",)),
)


async def take_shots(app: App, pilot: Pilot, shots=SHOTS) -> dict[str, str]:
    """The SVG of each shot by name, from an app already running under `run_test`.

    Each shot starts from the first tab with no dialog open, so one app serves them all.
    """
    svgs = {}
    for stem, keys in shots:
        for key in keys:
            await pilot.press(key)
        svgs[stem] = await settled_screenshot(app, pilot)
        while len(app.screen_stack) > 1:
            app.pop_screen()
        await pilot.press("1")
        await pilot.pause()
    return svgs


async def settled_screenshot(app: App, pilot: Pilot, tries: int = SETTLE_TRIES) -> str:
    """The screen once two exports in a row agree: on a loaded machine one `pause` could return while a
    refresh was still on its way (a CI run's Settings picture once differed from its stored one this way)."""
    await pilot.pause()
    svg = app.export_screenshot(title="frost-tui")
    for _ in range(tries):
        await pilot.pause(0.05)
        again = app.export_screenshot(title="frost-tui")
        if again == svg:
            break
        svg = again
    return svg


def convert_to_png(svg: Path) -> Path:
    """SVG → PNG with cairosvg, swapping the web font Textual names for an installed monospace one."""
    import cairosvg

    text = svg.read_text(encoding="utf-8").replace('"Fira Code"', f'"{MONOSPACE_FONT}"')
    text = text.replace("Fira Code", MONOSPACE_FONT)
    # DejaVu Sans Mono has no braille (the charts): draw those cells, placed one by one, with DejaVu Sans.
    text = _BRAILLE_TEXT.sub(lambda m: f'<text style="font-family: {BRAILLE_FONT}" ' + m.group(0)[len("<text "):], text)
    png = svg.with_suffix(".png")
    cairosvg.svg2png(bytestring=text.encode("utf-8"), write_to=str(png), scale=1.0)
    return png


def save_shots(svgs: dict[str, str], out_dir: Path) -> list[Path]:
    """Write each shot as `<stem>.svg` and `<stem>.png` in `out_dir`; returns the PNG paths."""
    pngs = []
    for stem, svg in svgs.items():
        path = out_dir / f"{stem}.svg"
        path.write_text(svg, encoding="utf-8")
        pngs.append(convert_to_png(path))
    return pngs
