"""A guest's checkpoints leave through the memfd the node gives it, not its pipe: real guests, real files."""

from __future__ import annotations

import re

import pytest
import trio

from frost_core.guest import Completed, GuestSupervisor, envelope, handoff
from frost_core.plugin.plain import decode_plain
from frost_core.storage import checkpoints
from frost_core.storage.checkpoints import StoredCheckpoint
from tests.guest_kit import BALLAST, COUNTER, MIB, Recorder, broken, counter_result, fast_settings, make_task, write_plugin

pytestmark = pytest.mark.skipif(not handoff.AVAILABLE, reason="memfds are Linux's")

# Honest at its first checkpoint, then it lies through the runtime it shares a process with (plugin code may
# patch it): its memfd cut to half the size it announces, or a size announced over any limit.
LIAR = broken(
    """
    fills, answers = [], []
    def start(self, unit):
        import dataclasses, sys
        child = sys.modules["__main__"]  # the guest runtime, frost_core.guest.child
        honest_fill, honest_write, lie = child.fill_outbox, child.write_frame, unit.data["lie"]
        fills, answers = self.fills, self.answers
        def fill(fd, pieces):
            fills.append(1)
            if len(fills) > 1 and lie == "cut":
                whole = b"".join(pieces)
                honest_fill(fd, [whole[: len(whole) // 2]])
                return len(whole)
            return honest_fill(fd, pieces)
        def write_frame(outbox, message):
            if getattr(message, "handed", 0):
                answers.append(1)
                if len(answers) > 1 and lie == "size":
                    message = dataclasses.replace(message, handed=1 << 50)
            honest_write(outbox, message)
        child.fill_outbox, child.write_frame = fill, write_frame
        return {"i": 0, "pad": b"p" * unit.data["pad"], "lie": lie}
    def step(self, state):
        if len(self.fills) >= 3 and len(self.answers) >= 3:  # two lies told (or more)
            return Done({"lies": len(self.fills if state["lie"] == "cut" else self.answers) - 1})
        return {**state, "i": state["i"] + 1}
    def progress(self, state):
        return 0.5
    """
)


@pytest.mark.parametrize("plugin, data, memory, handed", [
    (COUNTER, {"n": 1500, "spin": 2000}, 8 * MIB, False),  # under HAND_OUT_FROM: up the pipe, memfd or not
    (BALLAST, {"n": 2000, "mib": 6}, 64 * MIB, True),      # its hash follows the answer: the node copies meanwhile
    (BALLAST, {"n": 2000, "mib": 20}, 160 * MIB, True),    # announced before it is written: the node's copy follows it
], ids=["small", "hash-after", "announced"])
async def test_a_guests_checkpoints_leave_through_its_memfd_from_hand_out_from_and_read_back_bit_identical(
        tmp_path, plugin, data, memory, handed):
    records = []
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(), on_event=Recorder(),
                             on_checkpoint=lambda task, record: records.append(record))
    path = write_plugin(tmp_path, plugin.split("class ")[1].split("(")[0].lower(), plugin)
    task = make_task(path, data, memory=memory)
    outcome = await guests.run(task)
    assert isinstance(outcome, Completed)
    if plugin is COUNTER:
        assert outcome.value() == counter_result(path, data)
    assert records
    assert [isinstance(record, StoredCheckpoint) for record in records] == [handed] * len(records), \
        "through the memfd" if handed else "up the pipe"
    durable = await trio.to_thread.run_sync(guests.store.latest, task.task_id)  # read back and its hash checked
    assert durable == records[-1]
    state = decode_plain(envelope.unpack(envelope.STATE, durable.state)[0], "state")
    assert 0 < state["i"] <= data["n"]
    if plugin is BALLAST:
        assert state["ballast"] == bytes(range(256)) * (data["mib"] * 4096)


async def test_a_state_from_hash_after_from_comes_up_the_pipe_hashed_by_its_guest_never_by_the_node(
        tmp_path, monkeypatch):
    node_hashes, records = [], []
    real_digest = checkpoints._digest
    monkeypatch.setattr(checkpoints, "_digest", lambda *args: node_hashes.append(args[0]) or real_digest(*args))
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(), on_event=Recorder(),
                             on_checkpoint=lambda task, record: records.append(record))
    path = write_plugin(tmp_path, "ballast", BALLAST)
    data = {"n": 1500, "mib": 1}
    task = make_task(path, data, memory=32 * MIB)
    outcome = await guests.run(task)
    assert isinstance(outcome, Completed) and outcome.value() == counter_result(path, data)
    assert len(records) >= 2 and not any(isinstance(record, StoredCheckpoint) for record in records), "up the pipe"
    assert node_hashes == []
    durable = await trio.to_thread.run_sync(guests.store.latest, task.task_id)  # read back, the guest's hash checked
    assert durable == records[-1] and node_hashes
    assert decode_plain(envelope.unpack(envelope.STATE, durable.state)[0], "state")["ballast"] == bytes(range(256)) * 4096


@pytest.mark.parametrize("lie, pad, error", [
    ("cut", 6 * MIB, "holds .* bytes, not the"),
    ("cut", 20 * MIB, "holds .* bytes, not the"),
    ("size", 6 * MIB, "over the limit"),
    ("size", 20 * MIB, "over the limit"),
])
async def test_a_guest_that_cuts_its_memfd_or_lies_about_its_size_loses_that_checkpoint_only(tmp_path, lie, pad, error):
    recorder = Recorder()
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(), on_event=recorder)
    path = write_plugin(tmp_path, "broken", LIAR)
    task = make_task(path, {"lie": lie, "pad": pad}, memory=160 * MIB)
    outcome = await guests.run(task)
    assert isinstance(outcome, Completed)  # it ran on, not killed
    lies = outcome.value()["lies"]
    errors = recorder.messages("error")
    assert lies >= 2 and len(errors) == lies and all(re.search(error, message) for message in errors), errors
    assert "the previous checkpoint is kept" in errors[0]
    honest = recorder.messages("checkpoint")  # (one may have come up the pipe, asked before the unit's start went)
    assert 1 <= len(honest) <= 2
    durable = await trio.to_thread.run_sync(guests.store.latest, task.task_id)
    assert durable is not None and honest[-1].startswith(f"checkpoint {durable.seq}:")  # it stays, and reads back whole


async def test_a_state_that_fits_its_guests_memory_once_but_not_twice_goes_up_the_pipe_and_the_unit_runs_on(tmp_path):
    # 48 MiB of state under a cap of 40 MiB declared + 64 MiB slack: through the memfd, whose pages count
    # against that cap beside the state, its memory cgroup killed the guest at its first checkpoint.
    records = []
    guests = GuestSupervisor(data_dir=tmp_path / "node", settings=fast_settings(), on_event=Recorder(),
                             on_checkpoint=lambda task, record: records.append(record))
    path = write_plugin(tmp_path, "ballast", BALLAST)
    outcome = await guests.run(make_task(path, {"n": 400, "mib": 48}, memory=40 * MIB))
    assert isinstance(outcome, Completed), outcome
    assert records and not any(isinstance(record, StoredCheckpoint) for record in records), "up the pipe"
