"""The README's "Several nodes on one machine" recipe, run as written, forms a cluster.

The recipe runs on the default configuration, which broadcasts to 255.255.255.255 and listens on every
address. So it runs on a desk of its own: a network namespace with one link and a default route, where
its ports are free and its broadcasts reach nothing but the test's own bridge.
"""

import json
import os
import re
import shlex
import signal
import subprocess
from pathlib import Path

from tests.netns import Topology, require_netns
from tests.nodes import FROST_TUI
from tests.waiting import wait_for

README = Path(__file__).resolve().parents[2] / "README.md"


def recipe() -> list[list[str]]:
    """The recipe's commands as argv lists, continuation lines joined, comments and `&` dropped."""
    text = README.read_text()
    block = re.search(r"Several nodes on one machine.*?```sh\n(.*?)```", text, re.S).group(1)
    return [shlex.split(line.rstrip("& "), comments=True) for line in block.replace("\\\n", " ").splitlines()]


def test_the_readme_recipe_for_several_nodes_on_one_machine_forms_a_cluster(tmp_path):
    require_netns()
    # Only the folders change, so that nothing is left in /tmp.
    commands = [[word.replace("/tmp/", f"{tmp_path}/") for word in command] for command in recipe()]
    *nodes, peers = commands
    assert [command[0] for command in commands] == ["frost-tui"] * 3 and all("--headless" in c for c in nodes)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    with Topology(1) as topology:
        desk = topology.hosts[0]
        topology.route_everything_out(desk)
        on_desk = ["ip", "netns", "exec", desk.namespace]
        outputs = [tmp_path / f"node{number}.out" for number in range(len(nodes))]
        started = []
        for command, output in zip(nodes, outputs):
            with output.open("w") as out:
                started.append(subprocess.Popen([*on_desk, FROST_TUI, *command[1:]], env=env, stdout=out,
                                                stderr=subprocess.STDOUT))
        try:
            def states() -> list[str]:
                done = subprocess.run([*on_desk, FROST_TUI, *peers[1:], "--json"], env=env, capture_output=True,
                                      text=True, timeout=60)
                return [peer["state"] for peer in json.loads(done.stdout)["result"]] if done.returncode == 0 else [
                    done.stderr.strip()]

            wait_for(lambda: states() == ["alive", "alive"], timeout=60, what="both nodes alive in n1's peer table",
                     show=lambda: (states(), [output.read_text()[-2000:] for output in outputs]))
        finally:
            for process in started:
                process.send_signal(signal.SIGTERM)
            for process in started:
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
