"""A unit that arrives with a damaged checkpoint is refused by the real host: nothing runs, nothing is kept.

The transfer itself no longer hashes the state (the channel's AEAD already authenticates it);
the host checks the SHA-256 while it makes the checkpoint durable, before it answers.
"""

from __future__ import annotations

import dataclasses

import pytest
import trio

from frost_core.storage.checkpoints import CheckpointRecord
from frost_core.cluster.messages import UnitSpec
from frost_core.config import Paths, load_config
from frost_core.node.wiring import Node
from frost_core.plugin.api import encode_plain, parse_params
from frost_core.plugin.calls import split_units

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

TASK_ID = "abcd1234-1.0"


async def test_a_unit_whose_checkpoint_fails_its_hash_is_refused_and_nothing_starts(tmp_path):
    paths = Paths.resolve(config_file=tmp_path / "none.toml", data_dir=tmp_path / "data")
    # Not about the owner: on a loaded machine the default policy may hold arrivals for CPU pressure,
    # and the refusal would then name the owner rather than the damaged checkpoint.
    node = Node(load_config(paths, {
        "node.listen_host": "127.0.0.1", "node.port": 0, "node.broadcast_address": "", "guests.cpus": 1,
        "owner.policy": "always",
    }))
    async with trio.open_nursery() as nursery:
        await nursery.start(node.serve)
        await node.registry.scan_async()
        info = node.registry.get("montecarlo-pi")
        unit = (await split_units(info, parse_params(info, {"samples": 1_000_000, "units": 1})))[0]
        spec = UnitSpec(task_id=TASK_ID, assignment_id="abcd1234-1", master="a-master-elsewhere",
                        plugin_name=info.name, plugin_version=info.version, plugin_hash=info.hash,
                        unit=encode_plain(unit.to_plain(), "work unit"), memory_bytes=unit.memory_bytes, epoch=2)
        sealed = CheckpointRecord.seal(task_id=TASK_ID, plugin_name=info.name, plugin_version=info.version,
                                       plugin_hash=info.hash, unit_index=0, epoch=2, seq=5, taken_at=1.0,
                                       state=b"\xa0" * 3 * 1024 * 1024)
        damaged = dataclasses.replace(sealed, state=b"\xa1" + sealed.state[1:], verified=False)

        verdict = await node.host.start("a-peer", spec, damaged, moved=True)

        assert not verdict.ok and "SHA-256" in verdict.reason
        assert node.fresh_snapshot().guests == ()
        assert node.supervisor.store.latest(TASK_ID) is None, "the damaged checkpoint was not kept"
        assert not list((node.supervisor.store.root / TASK_ID).glob("*")), "no temp file is left behind"
        nursery.cancel_scope.cancel()
