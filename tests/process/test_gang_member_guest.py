"""Gang members in real sandboxed guest processes, driven superstep by superstep by a tiny barrier loop here."""

from __future__ import annotations

import os
import pwd
import re
import signal
import socket
import textwrap
from pathlib import Path

import pytest
import trio

from frost_core.api.errors import PluginError
from frost_core.guest.containment import Containment
from frost_core.guest.gang_member import MemberGuest, MemberSpec, open_member
from frost_core.plugin.api import parse_params
from frost_core.plugin.gang import Inbox, MemberCheckpoint, check_agreement, deliver, run_gang_locally
from frost_core.plugin.loader import load_plugin_file
from tests.guest_kit import MIB, Recorder, fast_settings, guest_processes, write_plugin
from tests.process.containment import require_containment
from tests.process.guests import PLUGINS
from tests.waiting import wait_until

HEAT = PLUGINS / "heat_diffusion.py"
PARAMS = {"height": 30, "width": 24, "members": 3, "iterations": 12}


async def barrier_loop(members: list[MemberGuest], inboxes: list[Inbox], *, stop_before: int | None = None) -> list[Inbox]:
    """Step every member on its inbox at once, wait for all, deliver: until the gang is done or reaches `stop_before`.

    Returns the inboxes for the next superstep ([] once the gang is done).
    """
    while stop_before is None or members[0].superstep < stop_before:
        superstep, answers = members[0].superstep, [None] * len(members)

        async def one(rank: int) -> None:
            answers[rank] = await members[rank].step(inboxes[rank])

        async with trio.open_nursery() as nursery:
            for rank in range(len(members)):
                nursery.start_soon(one, rank)
        if check_agreement([answer.done for answer in answers], superstep):
            return []
        inboxes = deliver([answer.outbox for answer in answers], len(members))
    return inboxes


def specs(plugin_path: Path, params: dict, size: int, memory: int = 32 * MIB) -> list[MemberSpec]:
    return [MemberSpec(f"g4ng0001-1.{rank}", str(plugin_path), params, rank, size, memory) for rank in range(size)]


def combine(plugin_path: Path, params: dict, results: list) -> bytes:
    plugin = load_plugin_file(plugin_path)
    return plugin.combine(parse_params(plugin, params), results).data


async def test_heat_diffusion_in_three_guests_equals_one_process_bit_for_bit_also_after_a_restart_from_checkpoints(tmp_path):
    settings, scratch, events = fast_settings(), tmp_path / "scratch", Recorder()
    containment = Containment(data_dir=tmp_path, input_roots=(), settings=settings)
    reference = run_gang_locally(load_plugin_file(HEAT), PARAMS).data
    k = 5
    try:
        async with open_member(specs(HEAT, PARAMS, 3)[0], containment=containment, settings=settings,
                               scratch_root=scratch, on_event=events) as m0, \
                   open_member(specs(HEAT, PARAMS, 3)[1], containment=containment, settings=settings,
                               scratch_root=scratch, on_event=events) as m1, \
                   open_member(specs(HEAT, PARAMS, 3)[2], containment=containment, settings=settings,
                               scratch_root=scratch, on_event=events) as m2:
            members = [m0, m1, m2]
            assert len({m.pid for m in members}) == 3 and os.getpid() not in {m.pid for m in members}
            inboxes = await barrier_loop(members, [{}, {}, {}], stop_before=k)
            checkpoints = [await m.checkpoint(inboxes[m.spec.rank]) for m in members]
            assert await barrier_loop(members, inboxes) == []
            # Between supersteps a member waits on its pipe: it does not spin.
            cpu = [m.figures().cpu_seconds for m in members]
            await trio.sleep(0.5)
            assert [m.figures().cpu_seconds for m in members] == pytest.approx(cpu, abs=0.05)
            assert all(m.figures().memory_bytes > MIB and m.figures().cpu_seconds > 0 for m in members)
            results = [await m.finish() for m in members]
            old_pids = [m.pid for m in members]
        assert combine(HEAT, PARAMS, results) == reference
        assert results[0]["iterations"] == PARAMS["iterations"]
        assert not (scratch / "g4ng0001-1.0").exists()
        # All three are gone; fresh guests restart from the checkpoints taken at superstep k.
        assert [MemberCheckpoint.from_bytes(c, 3).superstep for c in checkpoints] == [k, k, k]
        inboxes = [MemberCheckpoint.from_bytes(c, 3).inbox for c in checkpoints]
        async with open_member(specs(HEAT, PARAMS, 3)[0], containment=containment, settings=settings,
                               scratch_root=scratch, checkpoint=checkpoints[0]) as m0, \
                   open_member(specs(HEAT, PARAMS, 3)[1], containment=containment, settings=settings,
                               scratch_root=scratch, checkpoint=checkpoints[1]) as m1, \
                   open_member(specs(HEAT, PARAMS, 3)[2], containment=containment, settings=settings,
                               scratch_root=scratch, checkpoint=checkpoints[2]) as m2:
            members = [m0, m1, m2]
            assert not {m.pid for m in members} & set(old_pids)
            assert [m.superstep for m in members] == [k, k, k]
            assert await barrier_loop(members, inboxes) == []
            results = [await m.finish() for m in members]
        with pytest.raises(PluginError, match="rank 2 .* checkpoint of rank 0"):
            async with open_member(specs(HEAT, PARAMS, 3)[2], containment=containment, settings=settings,
                                   scratch_root=scratch, checkpoint=checkpoints[0]):
                pass
    finally:
        containment.close()
    assert combine(HEAT, PARAMS, results) == reference
    assert any("gang member 0 of 3 started" in message for message in events.messages("start"))
    await wait_until(lambda: guest_processes() == [], timeout=15, what="every member's process to end")


async def test_a_paused_member_holds_its_superstep_until_resumed_and_an_evicted_one_is_gone_at_once(tmp_path):
    settings = fast_settings()
    containment = Containment(data_dir=tmp_path, input_roots=(), settings=settings)
    params = {**PARAMS, "members": 2}
    try:
        # An error in the body comes out as itself, not in an exception group, for the caller to catch by its type.
        with pytest.raises(trio.BrokenResourceError, match="gang member 1 crashed: the guest was killed by SIGKILL"):
            async with open_member(specs(HEAT, params, 2)[1], containment=containment, settings=settings,
                                   scratch_root=tmp_path / "scratch") as crashed:
                os.kill(crashed.pid, signal.SIGKILL)  # from outside: a crash, not an eviction
                await crashed.step({})
        async with open_member(specs(HEAT, params, 2)[0], containment=containment, settings=settings,
                               scratch_root=tmp_path / "scratch") as member:
            member.pause()
            answer: list = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_append, answer, member.step({}))
                await trio.sleep(0.5)
                assert answer == [] and member.figures().phase == "paused"
                member.resume()
                await wait_until(lambda: answer, timeout=60, what="the resumed member's answer")
            assert member.figures().phase == "waiting" and member.superstep == 1
            member.pause()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_append, answer, member.step(answer[0].outbox))
                await trio.sleep(0.2)
                member.evict()  # mid-superstep, frozen: it goes at once all the same
            assert isinstance(answer[1], trio.BrokenResourceError) and "gang member 0 is gone: evicted" in str(answer[1])
            assert member.figures().phase == "ended"
            with trio.fail_after(15):
                await member.child.process.wait()
    finally:
        containment.close()


async def _append(into: list, awaitable) -> None:
    """Append the answer, or the error, of `awaitable`."""
    try:
        into.append(await awaitable)
    except (trio.BrokenResourceError, PluginError) as error:
        into.append(error)


ESCAPES = textwrap.dedent(
    """
    import os, socket
    from frost_core import GangPlugin, Output, Param, Superstep

    class Escapes(GangPlugin):
        name = "escapes"
        version = "1"
        params = (Param("secret", str, "", "a file it must not read"), Param("port", int, 0, "a port it must not reach"))

        def members(self, params):
            return 2

        def start(self, params, rank, size):
            return dict(params)

        def step(self, state, rank, size, inbox):
            attempts = {}

            def attempt(name, action):
                try:
                    action()
                    attempts[name] = "allowed"
                except OSError as error:
                    attempts[name] = f"refused: {type(error).__name__}: {error.strerror}"

            def read():
                with open(state["secret"], "rb") as file:
                    file.read()

            def connect():
                with socket.create_connection(("127.0.0.1", state["port"]), timeout=5):
                    pass

            def write():
                with open("mine.txt", "w") as file:
                    file.write("in its own folder")

            attempt("read the node's secret", read)
            attempt("connect to 127.0.0.1", connect)
            attempt("raise its priority", lambda: os.setpriority(os.PRIO_PROCESS, 0, 0))
            attempt("write in scratch", write)
            return Superstep({"attempts": attempts, "uid": os.getuid(), "nice": os.getpriority(os.PRIO_PROCESS, 0),
                              "policy": os.sched_getscheduler(0)}, done=True)

        def finish(self, state, rank, size):
            return state

        def combine(self, params, results):
            return Output(b"", "text/plain", "out.txt")

    plugin = Escapes()
    """
)


async def test_a_member_cannot_read_outside_its_folder_nor_reach_the_network_and_runs_at_the_lowest_priority(tmp_path):
    require_containment()
    data_dir = tmp_path / "node"
    data_dir.mkdir()
    (data_dir / "cluster.key").write_text("the cluster's secret")
    settings, events = fast_settings(), Recorder()
    containment = Containment(data_dir=data_dir, input_roots=(), settings=settings)
    plugin = write_plugin(tmp_path, "escapes", ESCAPES)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        params = {"secret": str(data_dir / "cluster.key"), "port": listener.getsockname()[1]}
        try:
            async with open_member(specs(plugin, params, 2)[0], containment=containment, settings=settings,
                                   scratch_root=data_dir / "scratch", on_event=events) as member:
                assert (await member.step({})).done
                report = await member.finish()
        finally:
            containment.close()
        with pytest.raises(BlockingIOError):
            listener.accept()
    attempts = report["attempts"]
    assert attempts["read the node's secret"].startswith("refused: PermissionError"), attempts
    assert attempts["connect to 127.0.0.1"].startswith("refused: "), attempts
    assert attempts["raise its priority"].startswith("refused: PermissionError"), attempts
    assert attempts["write in scratch"] == "allowed"
    assert report["uid"] == pwd.getpwnam("nobody").pw_uid
    assert report["nice"] == 19 and report["policy"] == os.SCHED_IDLE
    refused = events.messages("refused")
    assert any(f"open {params['secret']!r} for reading" in message for message in refused), refused
    assert any("gang member 0 was refused: connect to ('127.0.0.1'" in message for message in refused), refused


VIOLATOR = textwrap.dedent(
    """
    from frost_core import GangPlugin, Output, Superstep

    class Violator(GangPlugin):
        name = "violator"
        version = "1"

        def members(self, params):
            return 4

        def start(self, params, rank, size):
            return 0

        def step(self, state, rank, size, inbox):
            if state == 2 and rank == 1:
                return Superstep(state + 1, {7: ["lost"]})  # rank 7 of a gang of 3
            if state == 2 and rank == 2:
                raise ValueError("rank 2 gives up")
            if state == 2 and rank == 0:
                state = [b"x" * (8 << 20) for _ in range(24)]  # 192 MiB where it declared 32
            while state == 2 and rank == 3:
                pass
            return Superstep(state + 1, {(rank + 1) % size: [state]})

        def finish(self, state, rank, size):
            return state

        def combine(self, params, results):
            return Output(b"", "text/plain", "out.txt")

    plugin = Violator()
    """
)


async def test_a_contract_violation_in_one_member_fails_naming_its_rank_and_superstep(tmp_path):
    settings = fast_settings()
    # Rank 3 loops forever: it is stopped after 0.2 s of CPU in a step; the interpreter's start (~0.3 s) does not count.
    impatient = fast_settings(step_timeout=0.2)
    containment = Containment(data_dir=tmp_path, input_roots=(), settings=settings)
    plugin = write_plugin(tmp_path, "violator", VIOLATOR)
    try:
        async with open_member(specs(plugin, {}, 4)[0], containment=containment, settings=settings,
                               scratch_root=tmp_path / "scratch") as zero, \
                   open_member(specs(plugin, {}, 4)[1], containment=containment, settings=settings,
                               scratch_root=tmp_path / "scratch") as one, \
                   open_member(specs(plugin, {}, 4)[2], containment=containment, settings=settings,
                               scratch_root=tmp_path / "scratch") as two, \
                   open_member(specs(plugin, {}, 4)[3], containment=containment, settings=impatient,
                               scratch_root=tmp_path / "scratch") as three:
            members = [zero, one, two, three]
            for superstep in range(2):
                answers: list = [[] for _ in members]
                async with trio.open_nursery() as nursery:
                    for rank, member in enumerate(members):
                        nursery.start_soon(_append, answers[rank], member.step({(rank - 1) % 4: [superstep]}))
                assert [answer.outbox for (answer,) in answers] == [{(rank + 1) % 4: [superstep]} for rank in range(4)]
            # Superstep 2: each member breaks the contract its own way, all at once.
            failures: list = [[] for _ in members]
            async with trio.open_nursery() as nursery:
                for rank, member in enumerate(members):
                    nursery.start_soon(_append, failures[rank], member.step({}))
            expected = [
                (PluginError, r"^superstep 2: rank 0: memory: the guest was killed by its memory cgroup: it used more than "
                              r"its declared 32 MiB"),
                (PluginError, r"^superstep 2: rank 1 sent to rank 7, but the ranks of this gang are 0 to 3"),
                (PluginError, r"^superstep 2: rank 2: step\(\) raised ValueError: rank 2 gives up"),
                (PluginError, r"^superstep 2: rank 3: no progress: a step ran .* s of CPU without finishing"),
            ]
            for (failure,), (kind, pattern) in zip(failures, expected):
                assert isinstance(failure, kind) and re.search(pattern, str(failure)), failure
            with pytest.raises(trio.BrokenResourceError, match="gang member 1 is gone"):
                await one.step({})
            assert [member.figures().phase for member in members] == ["ended"] * 4
    finally:
        containment.close()
    assert guest_processes() == []
