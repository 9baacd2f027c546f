"""Nodes started at the same moment with one new --cluster-key-file agree on one key and never crash."""

import socket
import subprocess
import sys

from tests.waiting import wait_for

RACER = """
import sys, time
from pathlib import Path
from frost_core import ClusterKey
go = Path(sys.argv[2])
Path(sys.argv[3]).touch()
while not go.exists():
    time.sleep(0.001)
print(ClusterKey.load_or_create(Path(sys.argv[1])).to_join_code())
"""


def test_processes_that_create_one_key_file_at_once_all_get_the_same_key(tmp_path):
    key_file, go = tmp_path / "shared" / "cluster.key", tmp_path / "go"
    ready = [tmp_path / f"ready-{index}" for index in range(8)]
    racers = [subprocess.Popen([sys.executable, "-c", RACER, str(key_file), str(go), str(flag)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for flag in ready]
    try:
        # Every racer is polling before the start, so they create the key together.
        wait_for(lambda: all(flag.exists() for flag in ready), timeout=60, what="the racers to be ready")
        go.touch()
        results = [racer.communicate(timeout=60) for racer in racers]
    finally:
        for racer in racers:
            racer.kill()
            racer.wait()
    assert [racer.returncode for racer in racers] == [0] * 8, [stderr for _, stderr in results]
    assert len({stdout for stdout, _ in results}) == 1, "one key for all of them"
    assert key_file.read_text() == results[0][0]
    assert [p.name for p in key_file.parent.iterdir()] == ["cluster.key"], "no temporary file left behind"


def test_two_nodes_started_together_with_one_new_key_file_form_one_cluster(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from tests.nodes import start_node

    key_file = tmp_path / "shared.key"  # does not exist yet: the first node to start makes it
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with ThreadPoolExecutor(2) as pool:
        starting = [pool.submit(start_node, tmp_path / "one", key_file=key_file, port=port),
                    pool.submit(start_node, tmp_path / "two", key_file=key_file, seeds=(f"127.0.0.1:{port}",))]
    started = [future.result() for future in starting if future.exception() is None]
    try:
        assert len(started) == 2, [future.exception() for future in starting]
        assert [p.name for p in tmp_path.iterdir() if "key" in p.name] == ["shared.key"]
        wait_for(lambda: all(sum(p["state"] == "alive" for p in node.call("peers")) == 2 for node in started),
                 timeout=30, what="both nodes alive in both tables (one key)")
    finally:
        for node in started:
            node.stop()
