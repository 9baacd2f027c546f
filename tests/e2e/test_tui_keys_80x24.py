"""The keys a new user tries, in a real terminal at 80x24 (tmux) over a real embedded node: every
tab from every other with 1-8, the / filter left with escape, ? help, c to cancel an assignment,
and q to quit; the footer keeps q and ? in sight all along.

Slow (a real node in a real terminal); skipped where tmux is not installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.e2e.test_tui_tmux import Terminal, free_port
from tests.nodes import FAST_CONFIG, FROST_TUI

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (Debian package tmux)"),
]

# What only each tab shows at 80x24 (tab key -> words).
TAB_MARKS = {
    "1": "Lower threshold",
    "2": "At risk",
    "3": "filter peers",
    "4": "Runs on",
    "5": "Hash",
    "6": "filter events",
    "7": "owner.",
    "8": "Top giver",
}


def every_move(keys: str) -> list[str]:
    """Key presses that go from every tab to every other one once (an Euler circuit: 57 presses)."""
    unused = {key: [k for k in keys if k != key] for key in keys}
    stack, circuit = [keys[0]], []
    while stack:
        if unused[stack[-1]]:
            stack.append(unused[stack[-1]].pop())
        else:
            circuit.append(stack.pop())
    return circuit[::-1]


def on_tab(screen: str, key: str) -> bool:
    return TAB_MARKS[key] in screen and not any(mark in screen for k, mark in TAB_MARKS.items() if k != key)


def test_keys_at_80x24_visit_every_tab_filter_help_cancel_and_quit(tmp_path):
    ui_dir = tmp_path / "desk-a"
    ui_dir.mkdir()
    (ui_dir / "config.toml").write_text(FAST_CONFIG)
    command = [
        FROST_TUI, "--data-dir", str(ui_dir), "--config", str(ui_dir / "config.toml"), "--port", str(free_port()),
        "--listen-host", "127.0.0.1", "--broadcast-address", "", "--name", "desk-a",
    ]
    terminal = Terminal(f"frost-e2e-keys-{os.getpid()}", command, {"TERM": "xterm-256color"}, size=(80, 24))
    try:
        terminal.wait_for(lambda s: "desk-a" in s, timeout=30, what="the UI to start")
        submitted = subprocess.run(
            [FROST_TUI, "submit", "montecarlo-pi", "--param", "samples=4000000000", "--param", "units=1",
             "--data-dir", str(ui_dir), "--config", str(ui_dir / "config.toml")],
            capture_output=True, text=True, timeout=60,
        )
        assert submitted.returncode == 0, submitted.stderr
        assignment = submitted.stdout.split()[1].rstrip(":")

        presses = every_move("12345678")
        terminal.keys(presses[0])
        terminal.wait_for(lambda s: on_tab(s, presses[0]), timeout=30, what=f"tab {presses[0]}")
        for before, key in zip(presses, presses[1:]):
            terminal.keys(key)
            screen = terminal.wait_for(lambda s: on_tab(s, key), timeout=30, what=f"tab {key} after tab {before}")
            footer = screen.rstrip("\n").splitlines()[-1]
            assert "q Quit" in footer and "? Help" in footer, footer

        terminal.keys("3")
        terminal.wait_for(lambda s: on_tab(s, "3"), timeout=30, what="the Peers tab")
        # "/" and a filter that matches no peer in one burst, as typed fast or pasted: the letters reach the table
        # before the filter has the keyboard, and the app types them into it.
        terminal.keys("/", "z", "z", "z")
        # In the filter the footer drops the one-letter keys (they are text there); it may be drawn a frame after
        # the table (a CI run caught the table filtered and the old footer).
        terminal.wait_for(lambda s: re.search(r"\b0 of 1\b", s) and "q Quit" not in s.rstrip().splitlines()[-1],
                          timeout=30, what="the filter applied and the footer without the one-letter keys")
        terminal.keys("Escape")
        terminal.wait_for(lambda s: re.search(r"\b1 of 1\b", s) and "zzz" not in s, timeout=30,
                          what="escape to clear the filter")
        terminal.keys("6", "3")  # not applied unseen on a later visit either
        terminal.wait_for(lambda s: re.search(r"\b1 of 1\b", s), timeout=30, what="the peers unfiltered")

        terminal.keys("?")
        terminal.wait_for(lambda s: "frost-tui keys" in s and "filter the peers" in s, timeout=30, what="the help")
        terminal.keys("q")   # closes the help, not the app (escape, above, clears the filter; ? toggles)
        terminal.wait_for(lambda s: "frost-tui keys" not in s, timeout=30, what="the help to close")

        terminal.keys("4")
        terminal.wait_for(lambda s: assignment in s, timeout=30, what=f"{assignment} on the Assignments tab")
        terminal.keys("c")
        terminal.wait_for(lambda s: f"Cancel {assignment}?" in s, timeout=30, what="the cancel question")
        terminal.keys("y")
        terminal.wait_for(lambda s: re.search(rf"{re.escape(assignment)}\s+\S+\s+cancelled", s), timeout=30,
                          what=f"{assignment} cancelled")

        terminal.keys("q")
        screen = terminal.wait_for(lambda s: "desk-a" not in s or "Quit frost-tui?" in s, timeout=30,
                                   what="the UI to quit or ask")
        if "Quit frost-tui?" in screen:  # the cancelled unit's guest may not have stopped yet
            terminal.keys("k")
        terminal.wait_for(lambda s: "desk-a" not in s, timeout=30, what="the UI to quit")
    finally:
        terminal.close()
