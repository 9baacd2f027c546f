"""The README's "Several nodes on one machine" recipe, run as written, forms a cluster."""

import json
import os
import re
import shlex
import signal
import subprocess
from pathlib import Path

from tests.nodes import FROST_TUI, free_port
from tests.waiting import wait_for

README = Path(__file__).resolve().parents[2] / "README.md"


def recipe() -> list[list[str]]:
    """The recipe's commands as argv lists, continuation lines joined, comments and `&` dropped."""
    text = README.read_text()
    block = re.search(r"Several nodes on one machine.*?```sh\n(.*?)```", text, re.S).group(1)
    return [shlex.split(line.rstrip("& "), comments=True) for line in block.replace("\\\n", " ").splitlines()]


def test_the_readme_recipe_for_several_nodes_on_one_machine_forms_a_cluster(tmp_path):
    # Only the folders and the ports change: another test or node may hold 47701 and 47702.
    ports = {"47701": str(free_port()), "47702": str(free_port())}
    commands = [[ports.get(word, word).replace("/tmp/", f"{tmp_path}/").replace(":47701", ":" + ports["47701"])
                 for word in command] for command in recipe()]
    *nodes, peers = commands
    assert [command[0] for command in commands] == ["frost-tui"] * 3 and all("--headless" in c for c in nodes)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    started = [subprocess.Popen([FROST_TUI, *command[1:]], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL) for command in nodes]
    try:
        def alive() -> int:
            done = subprocess.run([FROST_TUI, *peers[1:], "--json"], env=env, capture_output=True, text=True,
                                  timeout=60)
            listed = json.loads(done.stdout)["result"] if done.returncode == 0 else []
            return sum(peer["state"] == "alive" for peer in listed)

        wait_for(lambda: alive() == 2, timeout=60, what="both nodes alive in n1's peer table")
    finally:
        for process in started:
            process.send_signal(signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
