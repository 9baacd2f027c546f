"""Helpers for the UI tests: run the app headless under asyncio and read what the screen shows.

pytest runs async tests under trio here (trio_mode), while Textual needs asyncio: so UI tests
are plain functions that call `run_ui`, which owns its asyncio loop.
"""

from __future__ import annotations

import asyncio
import io
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from rich.console import Console
from textual.pilot import Pilot

from frost_tui.app import FrostApp, create_app
from frost_tui.shots.fixed import DEMO_NOW

from tests.tui.fake_node import FakeNode

os.environ["TZ"] = "UTC"
time.tzset()

Scenario = Callable[[FrostApp, Pilot], Awaitable[None]]
SIZE = (132, 40)


def run_ui(node, scenario: Scenario, *, size: tuple[int, int] = SIZE, choices_file: Path | None = None) -> FrostApp:
    """Start the app on `node`, run `scenario`, quit; the app is returned for its exit code. `choices_file`: where
    the app keeps the owner's choices (None: nowhere, as in most tests)."""

    async def main() -> FrostApp:
        app = create_app(node, clock=lambda: DEMO_NOW, choices_file=choices_file)
        # No transitions: a tab's sliding underline is Textual's, and Pilot waits it out after every key
        # (about 0.25 s a tab switch: 23 s of the UI tests' 270). The tmux tests keep them.
        app.animation_level = "none"
        async with app.run_test(size=size, notifications=True) as pilot:
            await pilot.pause()
            await scenario(app, pilot)
        return app

    return asyncio.run(main())


def screen_text(app: FrostApp) -> str:
    """The characters on the terminal right now, dialogs included, without colours."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, color_system=None,
                      record=True, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


@pytest.fixture
def node() -> FakeNode:
    return FakeNode()


def make_config(tmp_path, **overrides):
    """A config for a real node on loopback, in its own directories, with no broadcast."""
    from frost_core.config import Paths, load_config

    paths = Paths.resolve(config_file=tmp_path / "config.toml", data_dir=tmp_path / "data")
    values = {"node.port": 0, "node.listen_host": "127.0.0.1", "node.broadcast_address": "", "node.name": "desk-a"}
    values.update(overrides)
    return load_config(paths, values)


@pytest.fixture
def real_node(tmp_path):
    """A real frost_core Node on loopback."""
    from frost_core.node.wiring import Node

    return Node(make_config(tmp_path))
