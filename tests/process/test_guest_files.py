"""Guests with files: inputs opened by name through the node, outputs carried by checkpoints and results."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import trio

from frost_core.api.errors import FrostError
from frost_core.guest import Completed, Evicted, Failed, GuestSupervisor, InputFile
from frost_core.guest.envelope import STATE, unpack
from frost_core.plugin.api import run_locally
from frost_core.plugin.registry import load_plugin_file
from tests.guest_kit import Recorder, fast_settings, guest_processes, make_task
from tests.waiting import wait_until

GREP = Path(__file__).resolve().parents[2] / "plugins" / "grep.py"
UNIT = {"name": "log", "pattern": "needle", "ignore_case": False}


def write_log(folder: Path, lines: int = 150_000) -> Path:
    """About 18 bytes a line: 150,000 lines are forty steps of the grep plugin."""
    path = folder / "inputs" / "log.txt"  # the node's input store: guests may read it (`input_roots`)
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b"".join(b"line %d %s\n" % (i, b"needle" if i % 7 == 0 else b"hay" * (i % 5)) for i in range(lines)))
    return path


def reference(log: Path, folder: Path) -> tuple[dict, bytes]:
    """The unit's result and its output file when it runs in this process without interruption."""
    output = run_locally(load_plugin_file(GREP), {"pattern": "needle", "inputs": "log"}, inputs={"log": log},
                         output_dir=folder)
    [summary] = json.loads(output.data)["files"]
    return summary, (folder / "log.matches").read_bytes()


def grep_task(log: Path, **changes):
    stored = InputFile("log", hashlib.sha256(log.read_bytes()).hexdigest(), log.stat().st_size)
    return dataclasses.replace(make_task(GREP, UNIT, memory=32 << 20), inputs=(stored,), **changes)


def serving(log: Path, opened: list | None = None):
    """An `open_input` that hands out the real file, as the node does after a fetch."""

    async def open_input(task, input_file):
        if opened is not None:
            opened.append(input_file.name)
        return log

    return open_input


async def test_a_guest_reads_its_input_and_brings_its_output_file_with_the_result(tmp_path):
    log = write_log(tmp_path)
    summary, matches = reference(log, tmp_path / "reference")
    opened = []
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(), on_event=Recorder(),
                             open_input=serving(log, opened), input_roots=(log.parent,))
    outcome = await guests.run(grep_task(log))
    assert isinstance(outcome, Completed)
    assert outcome.value() == {"name": "log", "lines": summary["lines"], "matches": summary["matches"],
                               "bytes": log.stat().st_size}
    assert outcome.files == {"log.matches": matches}
    assert opened == ["log"], "the node is asked once per file; later opens are local"


async def test_a_guest_of_a_root_node_reads_an_input_only_the_owner_may_read_and_its_mode_is_kept(tmp_path):
    log = write_log(tmp_path, lines=20_000)
    log.chmod(0o600)  # the owner's file: the guest's unprivileged user may not read it where it is
    summary, _ = reference(log, tmp_path / "reference")
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(), on_event=Recorder(),
                             open_input=serving(log), input_roots=(log.parent,))
    outcome = await guests.run(grep_task(log))
    assert isinstance(outcome, Completed), outcome
    assert outcome.value()["matches"] == summary["matches"]
    assert log.stat().st_mode & 0o777 == 0o600  # handed over as a copy in its scratch folder, not by opening it up


async def test_output_files_survive_an_eviction_and_resume_on_another_host(tmp_path):
    log = write_log(tmp_path, lines=1_000_000)  # about a second of steps: time to stop it mid-file
    _, matches = reference(log, tmp_path / "reference")
    task = grep_task(log)
    first = GuestSupervisor(data_dir=tmp_path / "first", settings=fast_settings(), on_event=Recorder(),
                            open_input=serving(log), input_roots=(log.parent,))
    outcome_box = []
    async with trio.open_nursery() as nursery:

        async def run():
            outcome_box.append(await first.run(task))

        nursery.start_soon(run)
        await wait_until(lambda: any(f.last_checkpoint_seq and f.progress > 0.02 for f in first.figures()))
        first.pause_all()  # hold it mid-file; the eviction lets it run to its next migration point
        await first.evict()
    [evicted] = outcome_box
    assert isinstance(evicted, Evicted) and evicted.checkpoint is not None
    _state, files = unpack(STATE, evicted.checkpoint.state)
    assert 0 < len(files["log.matches"]) < len(matches), "the checkpoint carries the output written so far"

    # Another host: its own data dir and scratch folder, only the checkpoint travels.
    recorder = Recorder()
    second = GuestSupervisor(data_dir=tmp_path / "second", settings=fast_settings(), on_event=recorder,
                             open_input=serving(log), input_roots=(log.parent,))
    second.store.write(evicted.checkpoint)
    outcome = await second.run(task)
    assert isinstance(outcome, Completed) and outcome.files == {"log.matches": matches}
    assert any(f"from checkpoint {evicted.checkpoint.seq}" in m for m in recorder.messages("start"))


async def test_a_checkpoint_asked_for_while_a_file_is_opening_is_answered_after_and_a_slow_fetch_is_no_hang(tmp_path):
    log = write_log(tmp_path, lines=20_000)
    released = trio.Event()
    asked = trio.Event()

    async def slow_open(task, input_file):
        asked.set()
        await released.wait()
        return log

    settings = fast_settings(min_checkpoint_interval=600, max_checkpoint_interval=600)  # step timeout 1 s
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=settings, on_event=Recorder(), open_input=slow_open,
                             input_roots=(log.parent,))
    task = grep_task(log)
    outcome_box, checkpoints = [], []
    async with trio.open_nursery() as nursery:

        async def run():
            outcome_box.append(await guests.run(task))

        async def checkpoint():
            checkpoints.append(await guests.checkpoint_now(task.task_id, deadline=60))

        nursery.start_soon(run)
        await asked.wait()
        nursery.start_soon(checkpoint)
        await wait_until(lambda: [f for f in guests.figures() if f.state == "checkpointing"])
        await trio.sleep(1.5)  # the request waits in the guest, which waits for the file mid-start (not stuck)
        assert checkpoints == []
        released.set()
    [record] = checkpoints
    assert record is not None and record.seq == 1
    state, files = unpack(STATE, record.state)
    assert files == {} and state, "taken at the first migration point, right after start"
    assert isinstance(outcome_box[0], Completed)


async def test_a_name_the_assignment_did_not_bring_is_the_plugins_fault(tmp_path):
    log = write_log(tmp_path, lines=10)
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(), on_event=Recorder(),
                             open_input=serving(log), input_roots=(log.parent,))
    outcome = await guests.run(dataclasses.replace(grep_task(log), unit=make_task(GREP, {**UNIT, "name": "other"}).unit))
    assert isinstance(outcome, Failed) and not outcome.retryable
    assert "FileNotFoundError: no input file named 'other' (this assignment has: log)" in outcome.reason
    assert guest_processes() == []


async def test_an_input_the_node_cannot_get_fails_the_unit_for_a_retry_elsewhere(tmp_path):
    log = write_log(tmp_path, lines=10)

    async def unreachable(task, input_file):
        raise FrostError("the master n0de0001 is not reachable")

    recorder = Recorder()
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(), on_event=recorder,
                             open_input=unreachable, input_roots=(log.parent,))
    outcome = await guests.run(grep_task(log))
    assert isinstance(outcome, Failed) and outcome.retryable
    assert outcome.reason == "files: input file 'log' is unavailable: the master n0de0001 is not reachable"
    assert any("not reachable" in m for m in recorder.messages("error"))
