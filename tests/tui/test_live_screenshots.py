"""`frost-tui screenshots --live` still produces every picture from a real cluster.

It runs the command as the README tells (a separate process: it starts its own peers and
sets its own environment), then reads the text out of the exported SVGs.
"""

from __future__ import annotations

import html
import subprocess
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path

import pytest

from frost_tui.shots.live import PEERS
from frost_tui.shots.render import SHOTS
from tests.nodes import FROST_TUI

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SVG = "{http://www.w3.org/2000/svg}"


def screen_lines(svg: Path) -> list[str]:
    """The terminal's lines as the picture shows them: text runs grouped by row, left to right."""
    rows: dict[float, list[tuple[float, str]]] = defaultdict(list)
    for element in ElementTree.parse(svg).iter(f"{SVG}text"):
        if element.text and "clip-path" in element.attrib:  # the window title has no clip path
            rows[float(element.attrib["y"])].append((float(element.attrib["x"]), html.unescape(element.text)))
    return ["".join(text for _, text in sorted(runs)).replace("\xa0", " ") for _, runs in sorted(rows.items())]


def test_live_export_writes_every_picture_and_the_peers_tab_shows_the_peers(tmp_path):
    # Not about the owner: CI loads this machine, which the desk's default policy would rightly
    # take for a busy owner; --dedicated lends it anyway (the README's pictures are on the defaults).
    # Five seconds of charts, not the README's thirty: the pictures' content is what this reads.
    result = subprocess.run([FROST_TUI, "screenshots", "--live", "--dedicated", "--history", "5",
                             "--out", str(tmp_path)], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr

    for stem, _ in SHOTS:
        for suffix in (".svg", ".png"):
            assert (tmp_path / f"{stem}{suffix}").stat().st_size > 0, f"{stem}{suffix} is empty"
    peer_rows = [line.strip(" │").split() for line in screen_lines(tmp_path / "3-peers.svg")]
    for name, _ in PEERS:
        assert any(row[:1] == [name] and "alive" in row for row in peer_rows), (
            f"{name} is not an alive row of the Peers picture: {peer_rows}")
    assignments_tab = "\n".join(screen_lines(tmp_path / "4-assignments.svg"))
    assert "raytrace" in assignments_tab and "running" in assignments_tab
