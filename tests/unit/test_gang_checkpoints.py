"""The master's gang checkpoints on disk: one complete global checkpoint per gang, replaced whole, checked on read."""

from __future__ import annotations

import pytest
import trio

from frost_core.cluster.messages import GangSpec
from frost_core.master.gang import GlobalCheckpoint
from frost_core.master.gang_checkpoints import GangCheckpoints
from frost_core.plugin.gang import MemberCheckpoint

pytestmark = pytest.mark.unit

SPEC = GangSpec("a1b2c3", "master", "heat-diffusion", "1.0", "ab" * 32, b"\xa0", 256 << 20)


def global_checkpoint(superstep: int, size: int = 3) -> GlobalCheckpoint:
    parts = tuple(MemberCheckpoint(rank, superstep, {"rows": [rank * 1.5, superstep]}, {(rank + 1) % size: [rank]}).to_bytes()
                  for rank in range(size))
    return GlobalCheckpoint(superstep, 1000.0 + superstep, parts)


def files(kept: GangCheckpoints, gang_id: str = SPEC.assignment_id) -> list:
    folder = kept.store.root / gang_id
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


async def test_a_saved_global_checkpoint_loads_back_whole(tmp_path):
    kept = GangCheckpoints(tmp_path)
    assert await kept.save(SPEC, global_checkpoint(4))
    # A master started again reads it with a store of its own.
    assert await GangCheckpoints(tmp_path).load(SPEC.assignment_id, SPEC.plugin_hash, 3) == (global_checkpoint(4), [])


async def test_a_newer_checkpoint_replaces_the_last_and_an_older_one_is_dropped(tmp_path):
    kept = GangCheckpoints(tmp_path)
    await kept.save(SPEC, global_checkpoint(2))
    assert await kept.save(SPEC, global_checkpoint(5))
    assert not await kept.save(SPEC, global_checkpoint(3))   # written late: it must not replace superstep 5
    assert len(files(kept)) == 2, "the file before the newest is the slot the next save overwrites"
    checkpoint, errors = await kept.load(SPEC.assignment_id, SPEC.plugin_hash, 3)
    assert checkpoint.superstep == 5 and not errors


async def test_a_gang_that_ended_has_no_checkpoint_left_and_a_late_save_does_not_bring_it_back(tmp_path):
    kept = GangCheckpoints(tmp_path)
    await kept.save(SPEC, global_checkpoint(2))
    await kept.discard(SPEC.assignment_id)
    assert not await kept.save(SPEC, global_checkpoint(3))
    assert not (tmp_path / SPEC.assignment_id).exists()
    assert await kept.load(SPEC.assignment_id, SPEC.plugin_hash, 3) == (None, [])


@pytest.mark.parametrize("damage", ["flip a bit", "truncate"])
async def test_a_corrupt_or_truncated_file_is_an_error_naming_the_gang_and_the_file(tmp_path, damage):
    kept = GangCheckpoints(tmp_path)
    await kept.save(SPEC, global_checkpoint(2))
    [path] = kept.store.files(SPEC.assignment_id)
    data = bytearray(path.read_bytes())
    if damage == "flip a bit":
        data[-10] ^= 0x01
    else:
        del data[len(data) // 2:]
    path.write_bytes(bytes(data))
    checkpoint, errors = await GangCheckpoints(tmp_path).load(SPEC.assignment_id, SPEC.plugin_hash, 3)
    assert checkpoint is None and len(errors) == 1
    assert f"gang {SPEC.assignment_id}" in errors[0].message and str(path) in errors[0].message


async def test_a_checkpoint_of_another_gang_size_or_plugin_is_not_resumed_from(tmp_path):
    kept = GangCheckpoints(tmp_path)
    await kept.save(SPEC, global_checkpoint(2))
    wrong_size, errors = await kept.load(SPEC.assignment_id, SPEC.plugin_hash, 4)
    assert wrong_size is None and "does not hold 4 members' checkpoints" in errors[0].message
    wrong_plugin, errors = await kept.load(SPEC.assignment_id, "cd" * 32, 3)
    assert wrong_plugin is None and "of plugin abababababab" in errors[0].message


async def test_a_part_that_is_not_its_ranks_checkpoint_of_that_barrier_is_refused(tmp_path):
    kept = GangCheckpoints(tmp_path)
    good = global_checkpoint(2)
    await kept.save(SPEC, GlobalCheckpoint(2, good.at, (good.data[1], good.data[0], good.data[2])))
    checkpoint, errors = await kept.load(SPEC.assignment_id, SPEC.plugin_hash, 3)
    assert checkpoint is None and "rank 0's part holds rank 1 before superstep 2" in errors[0].message


async def test_a_load_while_saves_go_on_never_meets_a_file_half_written(tmp_path):
    """A restart of the gang may read while the coordinator saves its next barrier: each save overwrites a slot
    in place, and a read in the middle of it would call the newest file corrupt and fall back a barrier."""
    kept = GangCheckpoints(tmp_path)
    barriers = 30
    big = {rank: bytes(4 << 20) for rank in range(3)}   # long enough writes to be met by a read
    saved = [global_checkpoint(0)]

    async def saves() -> None:
        for superstep in range(1, barriers):
            parts = tuple(MemberCheckpoint(rank, superstep, {"plate": big[rank]}, {}).to_bytes() for rank in range(3))
            saved.append(GlobalCheckpoint(superstep, 1000.0, parts))
            await kept.save(SPEC, saved[-1])

    await kept.save(SPEC, saved[0])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(saves)
        loads = 0
        while len(saved) < barriers:
            durable = saved[-2].superstep if len(saved) > 1 else 0   # (the last one may be on its way)
            checkpoint, errors = await kept.load(SPEC.assignment_id, SPEC.plugin_hash, 3)
            loads += 1
            assert errors == [], f"load {loads} met a file half written"
            assert checkpoint is not None and checkpoint.superstep >= durable
    assert loads > 10, "the loads did not overlap the saves: the test proves nothing"
