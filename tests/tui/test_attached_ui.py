"""The UI over an attached node: what the header says, a watcher's keys, commands while reconnecting, `q` detaches."""

from __future__ import annotations

from frost_core import Link, PauseHosting

from tests.tui.conftest import run_ui, screen_text
from tests.tui.fake_node import FakeNode
from tests.waiting import wait_in_app

ATTACHED = Link(kind="attached", where="local node")


def test_the_header_says_whether_the_node_is_embedded_or_attached():
    node = FakeNode()

    async def scenario(app, pilot):
        assert "embedded node" in screen_text(app).splitlines()[0]
        node.link_state = ATTACHED
        node.publish()
        await wait_in_app(pilot, lambda: "attached to local node" in screen_text(app).splitlines()[0])

    run_ui(node, scenario)


def test_a_watching_ui_shows_no_key_that_changes_the_node_and_sends_nothing():
    node = FakeNode()
    node.link_state = Link(kind="attached", where="local node", watch=True)

    async def scenario(app, pilot):
        await wait_in_app(pilot, lambda: "(watching)" in screen_text(app).splitlines()[0])
        footer = screen_text(app).splitlines()[-1]
        for label in ("Pause/resume", "Evict all", "Submit", "Move", "Load plugin", "Finish+pause"):
            assert label not in footer
        assert "Quit" in footer and "(watching)" in screen_text(app).splitlines()[0]
        before = node.snapshot()
        await pilot.press("p", "e", "f")
        app.send(PauseHosting())  # what a Settings save or any other path would do
        await pilot.pause()
        assert node.snapshot() is before  # nothing reached the node
        assert "This UI only watches" in screen_text(app)
        await pilot.press("5")  # the Plugins tab's own key changes the node too
        await wait_in_app(pilot, lambda: "Remove plugin" not in screen_text(app).splitlines()[-1]
                          and "Quit" in screen_text(app).splitlines()[-1])

    run_ui(node, scenario)


def test_a_command_while_reconnecting_is_dropped_and_the_owner_told():
    node = FakeNode()
    node.link_state = Link(kind="attached", where="local node", connected=False)

    async def scenario(app, pilot):
        await wait_in_app(pilot, lambda: "reconnecting to local node…" in screen_text(app).splitlines()[0])
        before = node.snapshot()
        await pilot.press("p")
        await pilot.pause()
        assert node.snapshot() is before
        assert "Command dropped" in screen_text(app)

    run_ui(node, scenario)


def test_q_detaches_from_an_attached_node_without_asking_about_its_guests():
    node = FakeNode(guests=3)
    node.link_state = ATTACHED

    async def scenario(app, pilot):
        await pilot.press("q")
        await pilot.pause()
        assert app.return_code == 0
        assert node.snapshot().guests  # nobody evicted them: they run on under the node

    run_ui(node, scenario)
