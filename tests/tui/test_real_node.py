"""Every tab and every key against a real node with a real headless peer on loopback.

The app runs an in-process `frost_core.node.wiring.Node` (as `frost-tui` does); the peer is a separate
`frost-tui --headless` process. Each test presses keys as the owner would and checks both what
the screen shows and what the node did (its snapshot, its guest processes, the peer's guests).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import psutil
import pytest

from frost_core.api.commands import SubmitAssignment
from frost_core.node.wiring import Node
from frost_core.wire.security import ClusterKey
from tests.nodes import start_node
from tests.waiting import wait_for as wait_blocking

from tests.tui.conftest import make_config, run_ui, screen_text
from tests.waiting import wait_in_app

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
# One unit that runs for minutes: long enough to pause, move and evict while it runs.
LONG_PI = {"samples": 4_000_000_000, "units": 1}
PEER_CONFIG = """
[guests]
cpus = 1

[cluster]
report_interval = 0.5
host_timeout = 6

[checkpoints]
min_interval = 1
max_interval = 2

# Not about the owner: peer-b shares this machine with other work, which the default `share`
# policy would rightly take for a busy owner (tests/process/test_owner.py is on the defaults).
[owner]
policy = "always"
"""


@pytest.fixture(scope="module")
def cluster_key(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("key") / "cluster.key"
    ClusterKey.generate().save(path)
    return path


@pytest.fixture(scope="module")
def peer(tmp_path_factory, cluster_key):
    """peer-b: a headless node the desk joins through; paused unless a test wants it to host."""
    node = start_node(tmp_path_factory.mktemp("peers") / "peer-b", key_file=cluster_key, name="peer-b",
                      extra_config=PEER_CONFIG)
    node.call("pause")
    yield node
    node.stop()


def desk_node(tmp_path: Path, cluster_key: Path, peer, *, cpus: int = 1) -> Node:
    """desk-a: the node the UI runs, `cpus` CPUs for guests, joined to peer-b."""
    return Node(make_config(
        tmp_path, **{
            "cluster.key_file": str(cluster_key), "node.seeds": [peer.address], "guests.cpus": cpus,
            "gossip.interval": 0.3, "gossip.announce_interval": 2.0, "gossip.suspicion_min": 3.0,
            "cluster.report_interval": 0.5, "cluster.host_timeout": 6.0,
            "checkpoints.min_interval": 1.0, "checkpoints.max_interval": 2.0,
            # Not about the owner: the UI's node shares this machine with other work, which the
            # default `share` policy would rightly take for a busy owner (tests/process/test_owner.py).
            "owner.policy": "always",
        }))


@pytest.fixture
def desk(tmp_path, cluster_key, peer) -> Node:
    return desk_node(tmp_path, cluster_key, peer)


@pytest.fixture
def peer_hosting(peer):
    """peer-b takes guests for the length of one test."""
    peer.call("resume")
    yield peer
    peer.call("pause")


def peer_alive(app) -> bool:
    return app.snapshot is not None and any(p.name == "peer-b" and p.state == "alive" for p in app.snapshot.peers)


async def start_guest_here(app, pilot, desk: Node, *, units: int = 1) -> list[str]:
    """Submit a long assignment from the desk (peer-b paused, so its units run here); their task ids."""
    await wait_in_app(pilot, lambda: app.snapshot is not None and app.snapshot.address != "", timeout=30)
    app.send(SubmitAssignment(plugin="montecarlo-pi", params={**LONG_PI, "units": units}))
    await wait_in_app(pilot, lambda: len(app.snapshot.guests) == units
                   and all(g.state == "running" for g in app.snapshot.guests), timeout=60)
    return [g.task_id for g in app.snapshot.guests]


async def wait_to_see(app, pilot, *words: str, timeout: float = 10.0) -> None:
    """Wait until every one of `words` is on the screen; on failure, say what the screen showed."""
    try:
        await wait_in_app(pilot, lambda: all(w in screen_text(app) for w in words), timeout=timeout)
    except AssertionError:
        raise AssertionError(f"never saw {words}; the screen showed:\n{screen_text(app)}") from None


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def process_states(desk: Node) -> set[str]:
    return {psutil.Process(pid).status() for pid in desk.supervisor.guest_pids()}


def test_every_tab_shows_the_real_nodes_state(desk):
    async def scenario(app, pilot):
        task_id, = await start_guest_here(app, pilot, desk)
        await wait_in_app(pilot, lambda: peer_alive(app), timeout=30)
        assignment = app.snapshot.assignments[0]
        expected = {
            "1": ("H O S T I N G", "Transfer mode", "desk-a"),
            "2": (task_id, "montecarlo-pi", "running", "Work at risk"),
            "3": ("peer-b", "alive", "★ desk-a"),
            "4": (assignment.id, "montecarlo-pi", "Runs on", "desk-a"),
            "5": ("raytrace", "mandelbrot", "bundled", "ok (gang)"),
            "6": ("started",),
            "7": ("owner.policy", "What this desk lends", "owner.busy_cpu_percent"),
        }
        for key, words in expected.items():
            await pilot.press(key)
            await wait_to_see(app, pilot, *words)

    run_ui(desk, scenario)


def test_p_stops_the_guest_process_and_p_again_lets_it_run(desk):
    async def scenario(app, pilot):
        await start_guest_here(app, pilot, desk)
        await pilot.press("p")
        await wait_in_app(pilot, lambda: app.snapshot.hosting.state == "paused")
        assert "P A U S E D" in screen_text(app)
        # Frozen in its cgroup (the kernel shows disk-sleep), or stopped by signal where there is no freezer.
        assert process_states(desk) <= {psutil.STATUS_DISK_SLEEP, psutil.STATUS_STOPPED}
        await pilot.press("p")
        await wait_in_app(pilot, lambda: app.snapshot.hosting.state != "paused")
        assert process_states(desk) <= {psutil.STATUS_RUNNING, psutil.STATUS_SLEEPING}
        assert "P A U S E D" not in screen_text(app)

    run_ui(desk, scenario)


def test_x_evicts_only_the_selected_guest_and_e_all_the_others(tmp_path, cluster_key, peer):
    desk = desk_node(tmp_path, cluster_key, peer, cpus=2)

    async def scenario(app, pilot):
        first, second = await start_guest_here(app, pilot, desk, units=2)
        await pilot.press("2")
        await wait_in_app(pilot, lambda: first in screen_text(app))
        selected = app.query_one("GuestsPane").selected_guest().task_id
        await pilot.press("x")
        await pilot.pause()
        if app.screen.query("#yes"):  # a guest that has not checkpointed yet: x says what is lost and asks
            await pilot.press("y")
        staying = second if selected == first else first
        await wait_in_app(pilot, lambda: [g.task_id for g in app.snapshot.guests] == [staying], timeout=30)
        assert selected not in screen_text(app)
        await pilot.press("e")  # one key, no confirmation
        await wait_in_app(pilot, lambda: not app.snapshot.guests, timeout=30)
        assert len(app.screen_stack) == 1
        assert "No guests" in screen_text(app)
        assert not desk.supervisor.guest_pids()

    run_ui(desk, scenario)


def test_f_finishes_the_current_guest_then_pauses(desk):
    async def scenario(app, pilot):
        await start_guest_here(app, pilot, desk)
        await pilot.press("f")
        await wait_in_app(pilot, lambda: app.snapshot.hosting.finishing)
        assert "then pausing" in screen_text(app)
        assert process_states(desk) <= {psutil.STATUS_RUNNING, psutil.STATUS_SLEEPING}  # it keeps running

    run_ui(desk, scenario)


def test_s_submits_through_the_dialog_and_the_node_runs_it(desk):
    async def scenario(app, pilot):
        await wait_in_app(pilot, lambda: app.snapshot is not None and app.snapshot.plugins, timeout=30)
        await pilot.press("s")
        await wait_in_app(pilot, lambda: "Submit an assignment" in screen_text(app))
        assert any(p.name == "heat-diffusion" and p.gang for p in app.snapshot.plugins)
        assert "heat-diffusion" in app.screen.plugins  # a gang is offered like any plugin
        app.screen.query_one("#submit-plugin").value = "montecarlo-pi"
        await wait_in_app(pilot, lambda: bool(app.screen.query("#param-units")))
        await pilot.click("#param-units")
        await pilot.press("end", "ctrl+u", *"0")
        await wait_in_app(pilot, lambda: "units must be at least 1" in screen_text(app))
        await pilot.press("backspace", "2")
        await pilot.click("#param-samples")
        await pilot.press("end", "ctrl+u", *"20000", "enter")
        await wait_in_app(pilot, lambda: len(app.snapshot.assignments) == 1)
        assignment = app.snapshot.assignments[0]
        assert (assignment.plugin, assignment.params["units"], len(assignment.units)) == ("montecarlo-pi", 2, 2)
        await wait_in_app(pilot, lambda: app.snapshot.assignments[0].state == "done", timeout=60)
        await wait_in_app(pilot, lambda: "done" in screen_text(app) and assignment.id in screen_text(app))

    run_ui(desk, scenario)


def test_l_loads_a_plugin_file_and_reports_a_broken_one(desk, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # short relative paths: typing is slow in a test
    source = (PLUGINS / "mandelbrot.py").read_text().replace('name = "mandelbrot"', 'name = "julia"')
    (tmp_path / "julia.py").write_text(source)
    (tmp_path / "nonsense.py").write_text("this is not python\n")

    async def scenario(app, pilot):
        await wait_in_app(pilot, lambda: app.snapshot is not None and app.snapshot.plugins, timeout=30)
        await pilot.press("l")
        await pilot.press(*"julia.py", "enter")
        await wait_in_app(pilot, lambda: any(p.name == "julia" and p.ok for p in app.snapshot.plugins))
        await wait_in_app(pilot, lambda: "julia" in screen_text(app) and "added" in screen_text(app))
        await pilot.press("l")
        await pilot.press(*"nonsense.py", "enter")
        await wait_in_app(pilot, lambda: "Broken plugin" in screen_text(app))
        assert "Traceback" not in screen_text(app)

    run_ui(desk, scenario)


def test_m_moves_a_guest_to_the_peer_and_back_from_the_assignments_tab(desk, peer_hosting):
    peer = peer_hosting
    peer.call("pause")  # the unit starts here

    async def scenario(app, pilot):
        task_id, = await start_guest_here(app, pilot, desk)
        await wait_in_app(pilot, lambda: peer_alive(app), timeout=30)
        peer.call("resume")
        await pilot.press("2", "m")
        await wait_in_app(pilot, lambda: f"Move {task_id} to" in screen_text(app))
        assert "peer-b" in screen_text(app) and "this machine" not in screen_text(app)
        await pilot.press("enter")  # the only live peer
        await wait_in_app(pilot, lambda: not app.snapshot.guests, timeout=30)
        await wait_in_app(pilot, lambda: app.snapshot.assignments[0].units[0].host_name == "peer-b", timeout=30)
        assert task_id in {g["task_id"] for g in peer.call("status")["guests"]}

        await pilot.press("4")  # the unit of my assignment, now running on peer-b
        await wait_in_app(pilot, lambda: "peer-b" in screen_text(app))
        # Only a running unit can be moved: after the move its state says so once peer-b has reported.
        await wait_in_app(pilot, lambda: app.snapshot.assignments[0].units[0].state == "running", timeout=30)
        for attempt in range(3):  # a snapshot may redraw the units table between the click and the key
            await pilot.click("#units-table", offset=(3, 2))
            await pilot.press("m")
            try:
                await wait_in_app(pilot, lambda: "desk-a (this machine)" in screen_text(app), timeout=10)
                break
            except AssertionError:
                if attempt == 2:
                    raise AssertionError(f"no move dialog offering this machine:\n{screen_text(app)}") from None
                await pilot.press("escape")
        await pilot.press("enter")
        await wait_in_app(pilot, lambda: [g.task_id for g in app.snapshot.guests] == [task_id], timeout=30)
        await wait_in_app(pilot, lambda: app.snapshot.assignments[0].units[0].host_name == "desk-a", timeout=30)
        assert app.snapshot.assignments[0].units[0].moves == 2
        await wait_in_app(pilot, lambda: "desk-a" in screen_text(app))

    run_ui(desk, scenario)


def test_m_to_a_peer_that_refuses_is_a_titled_notification(desk, peer):
    async def scenario(app, pilot):
        task_id, = await start_guest_here(app, pilot, desk)
        await wait_in_app(pilot, lambda: peer_alive(app), timeout=30)
        await pilot.press("2", "m", "enter")  # peer-b is paused: it refuses the guest
        await wait_in_app(pilot, lambda: "Move failed" in screen_text(app), timeout=30)
        assert "Traceback" not in screen_text(app)
        assert [g.task_id for g in app.snapshot.guests] == [task_id]  # still running here

    run_ui(desk, scenario)


def test_slash_filters_peers_and_events(desk):
    async def scenario(app, pilot):
        await wait_in_app(pilot, lambda: peer_alive(app), timeout=30)
        await pilot.press("3", "slash", *"peer-")
        await wait_in_app(pilot, lambda: re.search(r"\b1 of \d+ · sorted", screen_text(app)) is not None)
        assert "peer-b" in screen_text(app) and "★ desk-a" not in screen_text(app)
        await pilot.press("enter", "6", "slash", *"desk-a started")
        await wait_in_app(pilot, lambda: re.search(r"\b1 of \d+", screen_text(app)) is not None)
        assert "node desk-a started at 127.0.0.1:" in screen_text(app)
        await pilot.press(*" on mars")
        await wait_in_app(pilot, lambda: re.search(r"\b0 of \d+", screen_text(app)) is not None)

    run_ui(desk, scenario)


def test_x_without_a_guest_says_what_to_do(desk):
    async def scenario(app, pilot):
        await wait_in_app(pilot, lambda: app.snapshot is not None and app.snapshot.address != "", timeout=30)
        await pilot.press("x")
        await wait_to_see(app, pilot, "Evict a guest")  # a notice: x acts only where its selection shows
        await pilot.press("2", "x")
        await wait_to_see(app, pilot, "No guest selected")
        await pilot.press("4", "m")
        await wait_to_see(app, pilot, "Nothing to move")

    run_ui(desk, scenario)


def test_the_command_palette_offers_the_commands(desk):
    async def scenario(app, pilot):
        await wait_in_app(pilot, lambda: app.snapshot is not None and app.snapshot.address != "", timeout=30)
        await pilot.press("ctrl+p")
        await pilot.press(*"pause or resume")
        await wait_to_see(app, pilot, "Pause or resume hosting (p)")
        await pilot.press("enter")
        await wait_in_app(pilot, lambda: app.snapshot.hosting.state == "paused")
        assert desk.intents.paused

    run_ui(desk, scenario)


def test_question_mark_shows_every_key(desk):
    async def scenario(app, pilot):
        await pilot.press("question_mark")
        await wait_in_app(pilot, lambda: "frost-tui keys" in screen_text(app))
        for words in ("pause hosting", "evict every guest", "finish the current guests", "submit an assignment",
                      "load a plugin", "quit"):
            assert words in screen_text(app)
        for tab, words in (("4", "move the selected unit"), ("3", "filter the peers")):  # a tab's keys come first
            await pilot.press("escape", tab, "question_mark")
            await wait_to_see(app, pilot, words)
        footer = screen_text(app).splitlines()[-1]
        for label in ("Pause/resume", "Evict all", "Submit", "Quit", "Help"):
            assert label in footer
        await pilot.press("escape")
        await wait_in_app(pilot, lambda: "frost-tui keys" not in screen_text(app))

    run_ui(desk, scenario)


def test_q_keep_leaves_the_guest_checkpointed_and_stops_it(desk):
    pids: list[int] = []

    async def scenario(app, pilot):
        await start_guest_here(app, pilot, desk)
        await wait_in_app(pilot, lambda: app.snapshot.guests[0].checkpoint_bytes > 0, timeout=30)
        pids.extend(desk.supervisor.guest_pids())
        await pilot.press("q")
        await wait_in_app(pilot, lambda: "Evict first" in screen_text(app))
        await pilot.press("k")

    app = run_ui(desk, scenario)
    assert app.return_code == 0
    assert pids
    wait_blocking(lambda: not any(alive(pid) for pid in pids), timeout=15, what="the guest process to end")


def test_q_evict_first_quits_once_the_guest_has_left(desk, peer):
    async def scenario(app, pilot):
        await start_guest_here(app, pilot, desk)
        await pilot.press("q")
        await wait_in_app(pilot, lambda: "Evict first" in screen_text(app))
        await pilot.press("e")
        for _ in range(600):  # the app exits by itself once the guest has left
            if not app.is_running:
                break
            await asyncio.sleep(0.1)

    app = run_ui(desk, scenario)
    assert app.return_code == 0
    assert app.snapshot.guests == ()


def test_ctrl_q_quits_at_once_with_the_guest_running(desk):
    async def scenario(app, pilot):
        await start_guest_here(app, pilot, desk)
        await pilot.press("ctrl+q")

    app = run_ui(desk, scenario)
    assert app.return_code == 0
    assert not app.host.running


def test_slash_on_assignments_finds_units_the_snapshot_does_not_carry(real_node):
    """A snapshot carries SNAPSHOT_UNITS of a long sweep's units; `/` asks the node for the others. On the default
    configuration; the owner pauses hosting first, in this test, so the sweep stands still while it is looked at."""
    from frost_core.api.snapshot import SNAPSHOT_UNITS
    from frost_tui.widgets.live_table import LiveTable

    async def scenario(app, pilot):
        await wait_in_app(pilot, lambda: app.snapshot is not None and app.snapshot.address != "", timeout=30)
        await pilot.press("p")
        await wait_in_app(pilot, lambda: app.snapshot.hosting.state == "paused", timeout=10)
        app.send(SubmitAssignment(plugin="montecarlo-pi", params={"samples": 1_000, "units": 300}))
        await wait_in_app(pilot, lambda: [a.unit_count for a in app.snapshot.assignments] == [300], timeout=30)
        sweep = app.snapshot.assignments[0].id
        units = app.query_one("#units-table", LiveTable)
        await pilot.press("4")
        await wait_to_see(app, pilot, "200 of 300 shown: those running, then those waiting, by number")
        assert len(units._keys) == SNAPSHOT_UNITS and f"{sweep}.250" not in units._keys
        await pilot.press("slash", *"250", "enter")
        await wait_to_see(app, pilot, "1 of 1 matching “250” (of 300); escape: the usual ones")
        assert units._keys == [f"{sweep}.250"]
        await pilot.press("slash", "ctrl+u", *"queued 299", "enter")   # every word must match
        await wait_to_see(app, pilot, "1 of 1 matching “queued 299” (of 300)")
        assert units._keys == [f"{sweep}.299"]
        await pilot.press("slash", "ctrl+u", *"curie", "enter")
        await wait_to_see(app, pilot, "none of 300 matches “curie”")
        assert units._keys == []
        await pilot.press("escape")
        await wait_to_see(app, pilot, "200 of 300 shown: those running")
        assert len(units._keys) == SNAPSHOT_UNITS

    run_ui(real_node, scenario)


def test_a_node_still_measuring_its_machine_says_so_and_not_that_its_owner_is_busy(tmp_path):
    """A fresh desk's first screen said "◐ OWNER ACTIVE: measuring this machine" to an owner who had done nothing."""
    hosting = Node(make_config(tmp_path)).fresh_snapshot().hosting
    assert (hosting.state, hosting.reason) == ("held", "measuring this machine")


def test_the_settings_tab_joins_another_cluster_after_asking_and_the_peers_of_the_old_one_go(tmp_path, cluster_key,
                                                                                             peer):
    own_key = tmp_path / "desk.key"   # this desk's own file: joining rewrites it, and peer-b's stays as it is
    ClusterKey.load(cluster_key).save(own_key)
    desk = desk_node(tmp_path, own_key, peer)
    other = ClusterKey.generate()

    async def scenario(app, pilot):
        await wait_in_app(pilot, lambda: peer_alive(app), timeout=30)
        await pilot.press("7")
        await wait_in_app(pilot, lambda: bool(app.query("#join-input")), timeout=10)
        field = app.query_one("#join-input")
        app.query_one("#join-button").scroll_visible(animate=False, top=True)
        await pilot.pause()
        field.value = other.to_join_code()[:-3]   # a code cut short when copied: named here, nothing sent
        await pilot.click("#join-button")
        await wait_to_see(app, "Not joined", "was part of it lost when copying?")
        assert app.snapshot.cluster_join_code == ClusterKey.load(cluster_key).to_join_code()
        field.value = other.to_join_code()
        await pilot.press("escape", "j")   # the field again, from the form's keys
        assert app.focused is field
        await pilot.press("enter")
        await wait_to_see(app, f"Join cluster {other.fingerprint()}?")
        await pilot.press("y")
        await wait_in_app(pilot, lambda: app.snapshot.cluster_join_code == other.to_join_code(), timeout=10)
        await wait_in_app(pilot, lambda: not any(p.name == "peer-b" for p in app.snapshot.peers), timeout=10)
        await pilot.press("6")
        await wait_to_see(app, f"joined cluster {other.fingerprint()}")

    run_ui(desk, scenario)
    assert ClusterKey.load(own_key) == other
    # (by its id: every test's desk is named desk-a)
    wait_blocking(lambda: {p["node_id"]: p["state"] for p in peer.call("peers")}.get(desk.node_id) == "left",
                  timeout=10, what="peer-b to hear the desk leave")
