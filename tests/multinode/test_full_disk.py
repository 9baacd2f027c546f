"""The owner's disk fills while guests run: no node stops, no result is lost, and the work ends once there is room.

Before, the first write either node's stores tried on the full disk raised out of a long-lived task and
stopped the node with every guest on it; the other node then took the first one's leaving as a reason to
write, and stopped too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from frost_core.wire.security import ClusterKey
from tests.multinode.cluster import CLUSTER_CONFIG, assignment, reference_sha256, result_sha256, wait_for_members
from tests.nodes import start_node
from tests.waiting import wait_for

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small disk of its own needs root")]

SWEEP = {"samples": 8_000_000, "units": 2}
"""Two montecarlo-pi units of ~2 s each at guest priority, one on each node: both run (and checkpoint, and end)
while the disk is full."""


@contextlib.contextmanager
def small_disk(folder: Path, mib: int) -> Iterator[Path]:
    """A tmpfs of `mib` MiB at `folder`, unmounted afterwards: a disk this test may fill."""
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mib}m,mode=0700", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(disk: Path) -> Path:
    """Write zeros to a file on `disk` until it has no byte left; the file, to remove later."""
    filler = disk / "filler"
    chunk = bytes(1 << 20)
    with open(filler, "wb", buffering=0) as out:
        while True:
            try:
                out.write(chunk)
            except OSError as error:
                assert error.errno == errno.ENOSPC, error
                chunk = chunk[:len(chunk) // 2]
                if not chunk:
                    return filler


def events(node) -> list[dict]:
    return node.call("events")


def test_a_disk_that_fills_stops_no_node_and_loses_no_result(tmp_path):
    # Not about the owner: the two nodes share this machine with other work, which the default owner policy
    # would rightly take for a busy owner (tests/process/test_owner.py tests it on the defaults). CLUSTER_CONFIG:
    # one guest CPU a node (a unit on each), checkpoints every 1-2 s (one falls due while the disk is full) and
    # reports each 0.5 s (a kept result goes again within the test's seconds). The disk floor is the default.
    config = CLUSTER_CONFIG + '\n[owner]\npolicy = "always"\n'
    key_file = tmp_path / "cluster.key"
    ClusterKey.generate().save(key_file)
    with small_disk(tmp_path / "disk", 400) as disk:
        nodes = []
        try:
            nodes.append(start_node(disk / "master", key_file=key_file, extra_config=config))
            nodes.append(start_node(disk / "host", key_file=key_file, extra_config=config, seeds=(nodes[0].address,)))
            master, host = nodes
            wait_for_members(nodes)
            assignment_id = master.call("submit", plugin="montecarlo-pi", params=SWEEP)["id"]
            wait_for(lambda: sum(u["state"] == "running" for u in assignment(master, assignment_id)["units"]) == 2,
                     timeout=60, what="a unit running on each node")

            filler = fill(disk)
            # The guests go on; their checkpoints and results find no room; neither node takes a new guest.
            for node in nodes:
                wait_for(lambda node=node: node.call("status")["hosting"]["state"] == "held", timeout=30,
                         what=f"{node.data_dir.name} to stop taking guests")
                assert "disk" in node.call("status")["hosting"]["reason"]
                assert any(e["title"] == "Disk full" for e in events(node))
            time.sleep(4)   # long enough for both units to end, a checkpoint to be due and the ledger to be written
            assert all(node.process.poll() is None for node in nodes), "a node stopped when the disk filled"

            filler.unlink()
            wait_for(lambda: assignment(master, assignment_id)["state"] == "done", timeout=180,
                     what="the assignment to end once the disk has room")
            assert result_sha256(master, assignment_id, tmp_path) == reference_sha256("montecarlo_pi", SWEEP)
            for node in nodes:
                wait_for(lambda node=node: node.call("status")["hosting"]["state"] != "held", timeout=60,
                         what=f"{node.data_dir.name} to take guests again")
                assert any("the disk has room again" in e["message"] for e in events(node))
                assert node.process.poll() is None
        finally:
            for node in nodes:
                node.stop()
                # (the disk goes with the test: its logs and output are kept in tmp_path to read after a failure)
                shutil.copytree(node.data_dir, tmp_path / node.data_dir.name,
                                ignore=shutil.ignore_patterns("*.sqlite*", "checkpoints", "scratch"), dirs_exist_ok=True)
