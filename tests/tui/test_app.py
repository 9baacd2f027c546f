"""The app's life with a real node: start, show real state, quit cleanly; crashes and bursts."""

from __future__ import annotations

import asyncio

from frost_tui.app import SnapshotArrived, create_app
from frost_tui.shots.fixed import DEMO_NOW

from tests.tui.conftest import run_ui, screen_text
from tests.waiting import wait_in_app
from tests.tui.fake_node import FakeNode


def test_real_node_starts_shows_its_state_and_stops_cleanly_on_ctrl_q(real_node, tmp_path):
    node = real_node

    async def scenario(app, pilot):
        # the node is up once it has bound a port and published its address
        await wait_in_app(pilot, lambda: app.snapshot is not None and app.snapshot.address.startswith("127.0.0.1:"))
        text = screen_text(app)
        assert "desk-a" in text
        assert app.snapshot.hosting.state.replace("-", " ").upper().split()[0][0] in text
        await pilot.press("ctrl+q")

    app = run_ui(node, scenario)
    assert app.return_code == 0
    assert not app.host.running  # the trio run was awaited to its end, not abandoned
    assert (tmp_path / "data").is_dir()


def test_real_node_pause_key_pauses_hosting(real_node):
    node = real_node

    async def scenario(app, pilot):
        await wait_in_app(pilot, lambda: app.snapshot is not None and app.snapshot.address != "")
        await pilot.press("p")
        await wait_in_app(pilot, lambda: app.snapshot.hosting.state == "paused")
        assert "P A U S E D" in screen_text(app)
        await pilot.press("p")
        await wait_in_app(pilot, lambda: app.snapshot.hosting.state != "paused")

    run_ui(node, scenario)


def test_node_crash_exits_with_code_1_and_a_clear_message(capfd):
    node = FakeNode()

    async def scenario(app, pilot):
        node.crash(OSError(98, "Address already in use"))
        await pilot.pause(0.2)

    app = run_ui(node, scenario)
    assert app.return_code == 1
    printed = capfd.readouterr()
    assert "The node stopped: OSError: [Errno 98] Address already in use" in printed.err + printed.out
    assert "Traceback" not in printed.err + printed.out
    assert not node.serving


def test_a_crash_inside_a_nursery_names_our_error_not_the_group(capfd):
    from frost_core.api.errors import ProtocolError

    node = FakeNode()

    async def scenario(app, pilot):
        node.crash(ExceptionGroup("Exceptions from Trio nursery", [ProtocolError("bad frame from 10.0.0.9")]))
        await pilot.pause(0.2)

    app = run_ui(node, scenario)
    printed = capfd.readouterr()
    assert app.return_code == 1
    assert "The node stopped. Protocol error: bad frame from 10.0.0.9" in printed.err + printed.out


def test_ctrl_c_quits_cleanly_and_the_node_sees_cancellation():
    node = FakeNode()

    async def scenario(app, pilot):
        await pilot.press("ctrl+c")

    app = run_ui(node, scenario)
    assert app.return_code == 0
    assert node.stopped_cleanly


def test_a_burst_of_snapshots_is_one_redraw_showing_the_latest():
    node = FakeNode()
    arrived = []

    async def main():
        app = create_app(node, clock=lambda: DEMO_NOW)
        hook = lambda message: arrived.append(message) if isinstance(message, SnapshotArrived) else None  # noqa: E731
        async with app.run_test(size=(132, 40), message_hook=hook) as pilot:
            await pilot.pause()
            arrived.clear()
            for n in range(200):
                node.publish(name=f"storm-{n}")
            # A passive burst may wait for the next redraw slot (at most a second), then shows the last.
            await wait_in_app(pilot, lambda: "storm-199" in screen_text(app), timeout=5)
        return app

    asyncio.run(main())
    assert len(arrived) == 1
