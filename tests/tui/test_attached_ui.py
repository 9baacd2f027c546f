"""The UI over an attached node: what the header says, a watcher's keys, commands while reconnecting, `q` detaches."""

from __future__ import annotations

from textual.widgets import Input

from frost_core import AddPlugin, AttachedNode, ClusterKey, Link, PauseHosting, remote_target

from tests.nodes import free_port, start_node
from tests.tui.conftest import run_ui, screen_text
from tests.tui.fake_node import FakeNode
from tests.tui.test_submit_dialog import GREP_VIEW, submitted
from tests.waiting import wait_for, wait_in_app

ATTACHED = Link(kind="attached", where="local node")


def test_the_header_says_whether_the_node_is_embedded_or_attached():
    node = FakeNode()

    async def scenario(app, pilot):
        assert "embedded node" in screen_text(app).splitlines()[0]
        node.link_state = ATTACHED
        node.publish()
        await wait_in_app(pilot, lambda: "attached to local node" in screen_text(app).splitlines()[0])

    run_ui(node, scenario)


def test_an_80_column_header_still_counts_the_guests_and_running_assignments_attached_too_and_widens_again():
    """At 80 columns the whole header ended at the peers: the guests and running assignments fell off its end."""
    node = FakeNode()
    snapshot = node.snapshot()
    guests = f"{len(snapshot.guests)} guests"
    running = sum(1 for a in snapshot.assignments if a.state == "running")

    async def scenario(app, pilot):
        header = screen_text(app).splitlines()[0]
        assert guests in header and f"{running} running" in header and "embedded node" in header
        assert snapshot.address not in header   # what gave way first
        for link, said in ((ATTACHED, "attached"), (Link(kind="attached", where="lab-7:47632", connected=False),
                                                     "reconnecting…")):
            # "attached to local node" ended the line at "· 1" (the running count cut off): said in a word instead
            node.link_state = link
            node.publish()
            await wait_in_app(pilot, lambda: f" · {said} · " in screen_text(app).splitlines()[0])
            assert screen_text(app).splitlines()[0].rstrip().endswith(f"{guests} · {running} running")
        node.link_state = ATTACHED
        node.publish()
        await pilot.resize_terminal(140, 45)
        await wait_in_app(pilot, lambda: f"({snapshot.address})  ·  attached to local node" in screen_text(app).splitlines()[0])
        assert f"{guests}  ·  {running} assignment" in screen_text(app).splitlines()[0]

    run_ui(node, scenario, size=(80, 24))


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


def test_a_ui_attached_from_another_machine_previews_the_picture_and_w_saves_it_there(tmp_path):
    """The node's copy of a result is a path on the node's machine: a UI attached over the network shows and saves
    the bytes the node sends, not whatever that path names here (before: "No preview: no such file", and w failed)."""
    key = tmp_path / "cluster.key"
    ClusterKey.generate().save(key)
    port = free_port()
    # The guest must get a CPU on a machine busy with other work, which the default owner policy would rightly
    # keep from it: this test is about the result's way to another machine, not about the owner.
    desk = start_node(tmp_path / "desk", key_file=key, name="desk",
                      extra_config=f'\n[control]\nlisten = "127.0.0.1:{port}"\n[owner]\npolicy = "always"\n')
    try:
        token = ClusterKey.from_join_code(desk.cli("key", "owner-token").stdout.strip())
        assignment_id = desk.call("submit", plugin="mandelbrot", params={"width": 48, "height": 32, "max_iter": 50,
                                                                          "rows_per_unit": 32})["id"]
        wait_for(lambda: desk.call("assignment", assignment=assignment_id)["state"] == "done", timeout=120,
                 what="the assignment to finish")
        sent = tmp_path / "from-the-node.png"
        desk.call("result", assignment=assignment_id, output=str(sent))
        for copy in (desk.data_dir / "results").iterdir():   # "here", the node's own copy is not to be found
            copy.unlink()
        target = tmp_path / "laptop" / "set.png"
        target.parent.mkdir()
        ui = AttachedNode([remote_target(("127.0.0.1", port), lambda: token, "laptop-ui")])

        async def scenario(app, pilot):
            await wait_in_app(pilot, lambda: ui.link().connected and ui.link().remote
                              and any(a.state == "done" for a in app.snapshot.assignments), timeout=30)
            await pilot.press("4")
            await wait_in_app(pilot, lambda: "▀▀▀▀" in screen_text(app), timeout=30)
            await pilot.press("w")
            await wait_in_app(pilot, lambda: "Save the result" in screen_text(app))
            await pilot.press("end", "ctrl+u", *str(target), "enter")
            await wait_in_app(pilot, lambda: "Result saved" in screen_text(app), timeout=30)

        run_ui(ui, scenario)
    finally:
        desk.stop()
    assert target.read_bytes() == sent.read_bytes() and sent.stat().st_size > 0


def test_paths_typed_in_a_ui_attached_from_another_machine_are_the_nodes_and_are_not_checked_here():
    """A plugin to load and an input file are read by the node, on its machine: this machine's files say nothing
    of them (before, a path the node holds was refused as "No such file", and one that happened to exist here passed)."""
    node = FakeNode()
    node.link_state = Link(kind="attached", where="desk2:47632", remote=True)
    node.publish(plugins=(GREP_VIEW, *node.snapshot().plugins), assignments=())
    sent = submitted(node)

    async def scenario(app, pilot):
        await pilot.press("l")
        await wait_in_app(pilot, lambda: "desk2:47632 (the node reads it there)" in screen_text(app))
        await pilot.press(*"sq.py", "enter")
        await wait_in_app(pilot, lambda: "Give the whole path, from / on" in screen_text(app))
        await pilot.press("ctrl+u", *"/srv/nowhere-here/sq.py", "enter")
        await wait_in_app(pilot, lambda: bool(sent))
        await pilot.press("s")
        await wait_in_app(pilot, lambda: bool(app.screen.query("#file-inputs-0")))
        field = app.screen.query_one("#file-inputs-0", Input)
        assert field.placeholder == "path of the file on desk2:47632's machine"
        field.value = "/data/nowhere-here.log"
        await pilot.pause()
        await pilot.click("#submit")
        await wait_in_app(pilot, lambda: len(sent) == 2)

    run_ui(node, scenario)
    added, submitted_ = sent
    assert added == AddPlugin(path="/srv/nowhere-here/sq.py")
    assert submitted_.inputs == {"input": "/data/nowhere-here.log"}
