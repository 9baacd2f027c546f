"""An attached UI's connection to a real headless node: snapshots pushed live, commands carried out,
a watch-only connection refused at the protocol level, and a killed node reconnected to by itself."""

from __future__ import annotations

import dataclasses
import signal
import subprocess

import pytest
import trio

from frost_core.api.commands import PauseHosting, ResumeHosting
from frost_core.node.attach_protocol import AttachCommand, AttachRequest, SnapshotPush, receive_snapshot
from frost_core.node.attached import AttachedNode, local_target, remote_target
from frost_core.wire.channel import Channel
from frost_core.wire.codec import encode
from frost_core.wire.messages import to_plain
from frost_core.node.identity import remember_owner_token, remembered_owner_token
from frost_core.wire.security import ClusterKey
from frost_tui.targets import OwnerToken
from tests.nodes import FROST_TUI, free_port, start_node
from tests.waiting import wait_until


@pytest.fixture
def node(tmp_path):
    key = tmp_path / "cluster.key"
    ClusterKey.generate().save(key)
    started = start_node(tmp_path / "desk", key_file=key, name="desk")
    yield started
    started.stop()


async def _attached(node_process, *, watch: bool = False):
    attached = AttachedNode([local_target(node_process.paths.control_socket)], watch=watch)
    seen = []
    attached.set_snapshot_listener(seen.append)
    return attached, seen


def test_an_attached_node_streams_snapshots_and_carries_out_commands(node):
    async def main():
        attached, seen = await _attached(node)
        async with trio.open_nursery() as nursery:
            await nursery.start(attached.serve)
            await wait_until(lambda: attached.link().connected, timeout=30, what="attached")
            assert attached.snapshot().name == "desk" and attached.link().describe() == "attached to local node"
            attached.send_nowait(PauseHosting())
            await wait_until(lambda: attached.snapshot().hosting.state == "paused", timeout=30, what="paused")
            attached.send_nowait(ResumeHosting())
            await wait_until(lambda: attached.snapshot().hosting.state != "paused", timeout=30, what="resumed")
            count = len(seen)
            await wait_until(lambda: len(seen) > count + 1, timeout=30, what="live snapshots")  # once a second or so
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert node.call("status")["state"] != "paused"  # detaching stopped nothing
    assert node.process.poll() is None


def test_the_node_refuses_every_command_on_a_watch_connection_even_if_sent(node):
    """Below the UI: a raw watch connection sends a pause anyway; the node refuses it and says so."""
    async def main():
        with trio.fail_after(30):
            stream = await trio.open_unix_socket(str(node.paths.control_socket))
            async with Channel(stream) as channel:
                await channel.send(AttachRequest(watch=True))
                assert isinstance(await channel.receive(), SnapshotPush)
                first = await receive_snapshot(channel)
                assert first.cluster_join_code == ""  # a watcher never learns the cluster key
                await channel.send(AttachCommand(kind="PauseHosting", fields=encode(to_plain(PauseHosting, PauseHosting()))))
                while True:
                    if isinstance(await channel.receive(), SnapshotPush):
                        snapshot = await receive_snapshot(channel)
                        if any(e.kind == "refused" for e in snapshot.events):
                            return snapshot

    snapshot = trio.run(main)
    assert snapshot.hosting.state != "paused"
    refusal = next(e for e in snapshot.events if e.kind == "refused")
    assert "PauseHosting" in refusal.message and "watch" in refusal.message
    assert node.call("status")["state"] != "paused"


def test_an_attached_node_says_reconnecting_when_its_node_dies_and_comes_back_when_restarted(node, tmp_path):
    async def main():
        attached, _ = await _attached(node)
        async with trio.open_nursery() as nursery:
            await nursery.start(attached.serve)
            await wait_until(lambda: attached.link().connected, timeout=30, what="attached")
            first_id = attached.snapshot().node_id
            await trio.to_thread.run_sync(node.kill)
            await wait_until(lambda: not attached.link().connected, timeout=30, what="the loss noticed")
            assert attached.link().describe() == "reconnecting to local node…"
            attached.send_nowait(PauseHosting())  # pressed while reconnecting: dropped, never replayed
            restarted = await trio.to_thread.run_sync(lambda: start_node(
                node.data_dir, key_file=tmp_path / "cluster.key", name="desk"))
            try:
                await wait_until(lambda: attached.link().connected, timeout=30, what="attached again")
                assert attached.snapshot().node_id == first_id
                await trio.sleep(1.0)
                assert attached.snapshot().hosting.state != "paused"
            finally:
                await trio.to_thread.run_sync(restarted.stop)
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_an_attached_node_answers_typed_requests_and_a_watcher_only_its_queries(node):
    from frost_core import FrostError, GetStatus, NodeStatus

    async def main():
        owner, _ = await _attached(node)
        watcher, _ = await _attached(node, watch=True)
        async with trio.open_nursery() as nursery:
            await nursery.start(owner.serve)
            await nursery.start(watcher.serve)
            await wait_until(lambda: owner.link().connected and watcher.link().connected, timeout=30, what="attached")
            with trio.fail_after(30):
                assert isinstance(await owner.execute(PauseHosting()), str)
                status = await watcher.ask(GetStatus())
                assert isinstance(status, NodeStatus) and status.state == "paused"
                with pytest.raises(FrostError, match="watch only"):
                    await watcher.execute(ResumeHosting())
                assert (await owner.ask(GetStatus())).state == "paused"
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_next_target_switches_the_ui_to_the_next_node_of_its_list(node, tmp_path):
    lab = start_node(tmp_path / "lab", key_file=tmp_path / "cluster.key", name="lab")
    try:
        async def main():
            attached = AttachedNode([local_target(node.paths.control_socket), local_target(lab.paths.control_socket)])
            async with trio.open_nursery() as nursery:
                await nursery.start(attached.serve)
                await wait_until(lambda: attached.snapshot().name == "desk", timeout=30, what="desk shown")
                assert attached.link().switchable
                attached.next_target()
                await wait_until(lambda: attached.snapshot().name == "lab" and attached.link().connected, timeout=30,
                                 what="lab shown")
                attached.next_target()
                await wait_until(lambda: attached.snapshot().name == "desk", timeout=30, what="desk again")
                nursery.cancel_scope.cancel()

        trio.run(main)
    finally:
        lab.stop()


def test_watch_with_no_node_running_says_so_and_exits_3(tmp_path):
    result = subprocess.run([FROST_TUI, "--watch", "--data-dir", str(tmp_path)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 3
    assert "so none to watch" in result.stderr


def test_a_node_gone_silent_shows_reconnecting_and_is_back_once_it_answers_again(node):
    """SIGSTOP: the connection stays open but nothing comes; the keep-alive timeout notices."""
    async def main():
        attached, _ = await _attached(node)
        async with trio.open_nursery() as nursery:
            await nursery.start(attached.serve)
            await wait_until(lambda: attached.link().connected, timeout=30, what="attached")
            node.process.send_signal(signal.SIGSTOP)
            try:
                await wait_until(lambda: not attached.link().connected, timeout=30, what="the silence noticed")
            finally:
                node.process.send_signal(signal.SIGCONT)
            await wait_until(lambda: attached.link().connected, timeout=30, what="attached again")
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_an_attached_ui_gets_the_units_its_table_shows_of_a_long_sweep_and_the_counts_of_all(node):
    """A 10,000-unit sweep's every unit in every push cost the node ~90 ms and the UI ~110 ms a push: the UI gets
    the units its table shows (all waiting here: the first ones) and the counts; a script asking for the
    assignment whole gets every unit, and `/` finds any of them. The owner pauses hosting first so the sweep stands
    still while it is looked at."""
    from frost_core import FindUnits, GetAssignment, ListAssignments, SubmitAssignment
    from frost_core.api.snapshot import SNAPSHOT_UNITS

    async def main():
        attached, _ = await _attached(node)
        async with trio.open_nursery() as nursery:
            await nursery.start(attached.serve)
            await wait_until(lambda: attached.link().connected, timeout=30, what="attached")
            with trio.fail_after(60):
                await attached.execute(PauseHosting())
                submitted = await attached.execute(SubmitAssignment(plugin="montecarlo-pi",
                                                                    params={"samples": 1_000, "units": 500}))
                await wait_until(lambda: any(a.id == submitted.id for a in attached.snapshot().assignments),
                                 timeout=30, what="the sweep in a snapshot")
                shown = next(a for a in attached.snapshot().assignments if a.id == submitted.id)
                whole = await attached.ask(GetAssignment(assignment_id=submitted.id))
                found = await attached.ask(FindUnits(assignment_id=submitted.id, match="499"))
                listed = (*await attached.ask(ListAssignments()),
                          await attached.ask(GetAssignment(assignment_id=submitted.id, every_unit=False)))
            nursery.cancel_scope.cancel()
        return shown, whole, found, listed

    shown, whole, found, listed = trio.run(main)
    assert ([u.index for u in found.units], found.matched) == ([499], 1)   # one the snapshot does not carry
    for view in listed:    # what `frost-tui assignments` and `submit --wait` ask for: as the screen lists it
        assert (len(view.units), view.unit_count, view.units_done) == (SNAPSHOT_UNITS, 500, 0)
    assert (shown.unit_count, shown.units_done) == (500, 0)
    assert [u.index for u in shown.units] == list(range(SNAPSHOT_UNITS))
    assert len(whole.units) == whole.unit_count == 500

    def named(units):   # (why a unit waits is explained once somebody asks: the two may differ there)
        return [(u.index, u.task_id, u.state) for u in units]

    assert named(whole.units[:SNAPSHOT_UNITS]) == named(shown.units)


def test_a_ui_with_a_wrong_owner_token_says_it_was_refused_and_how_to_fix_it_and_the_fix_takes_while_it_runs(
        tmp_path, monkeypatch):
    """Before, it said 'reconnecting…' for ever (the refusal was in its log only), tried twice a second (a line in
    the node's Events every 5 s), and had kept the mistyped token for every later start."""
    key = tmp_path / "cluster.key"
    ClusterKey.generate().save(key)
    port = free_port()
    node = start_node(tmp_path / "desk", key_file=key, name="desk",
                      extra_config=f'\n[control]\nlisten = "127.0.0.1:{port}"\n')
    address, where, here = ("127.0.0.1", port), f"127.0.0.1:{port}", tmp_path / "laptop"
    right = ClusterKey.from_join_code(node.cli("key", "owner-token").stdout.strip())
    attempts = []

    def attach(token: OwnerToken) -> AttachedNode:
        target = remote_target(address, token, "ui-test", attached=token.taken)

        async def connect():
            attempts.append(token())
            return await target.connect()

        return AttachedNode([dataclasses.replace(target, connect=connect)])

    async def refused_then_fixed():
        # The cluster key typed at --attach's prompt: not the owner token.
        ui = attach(OwnerToken(here, address, typed=ClusterKey.load(key)))
        async with trio.open_nursery() as nursery:
            await nursery.start(ui.serve)
            await wait_until(lambda: ui.link().problem, timeout=30, what="the refusal shown")
            assert ui.link().describe() == f"owner token refused: {where}" and not ui.link().connected
            assert ui.snapshot().hosting.reason == (f"it refused this UI's owner token: `frost-tui key owner-token` "
                                                    f"there, then `frost-tui key remember {where} TOKEN` here.")
            await trio.sleep(3)   # (at the old pace: six more tries)
            assert len(attempts) == 1 and remembered_owner_token(here, address) is None
            assert [e["message"] for e in node.call("events") if e["kind"] == "refused"] == [
                "a UI at 127.0.0.1 was refused: it does not hold this node's owner token"]
            nursery.cancel_scope.cancel()
        # The owner follows the hint in another terminal; the UI tries it at its next attempt (a second apart here
        # instead of REFUSED_RETRY_INTERVAL's 30 s, not to wait that long).
        monkeypatch.setattr("frost_core.node.attached.REFUSED_RETRY_INTERVAL", 1.0)
        ui = attach(OwnerToken(here, address, typed=ClusterKey.load(key)))
        async with trio.open_nursery() as nursery:
            await nursery.start(ui.serve)
            await wait_until(lambda: ui.link().problem, timeout=30, what="the refusal shown")
            remember_owner_token(here, address, right)
            await wait_until(lambda: ui.link().connected, timeout=30, what="attached with the token kept meanwhile")
            assert not ui.link().problem and ui.snapshot().name == "desk"
            nursery.cancel_scope.cancel()
        assert remembered_owner_token(here, address) == right   # (not overwritten by the typed one)

    async def typed_right():
        elsewhere = tmp_path / "other-laptop"
        ui = attach(OwnerToken(elsewhere, address, typed=right))
        async with trio.open_nursery() as nursery:
            await nursery.start(ui.serve)
            await wait_until(lambda: ui.link().connected, timeout=30, what="attached with the typed owner token")
            nursery.cancel_scope.cancel()
        assert remembered_owner_token(elsewhere, address) == right   # kept once the node took it

    try:
        trio.run(refused_then_fixed)
        trio.run(typed_right)
    finally:
        node.stop()
