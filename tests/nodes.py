"""Start real `frost-tui --headless` nodes as separate processes and talk to them as the CLI does."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from frost_core.api.commands import (
    AddPlugin, CancelAssignment, EvictGuests, FinishThenPause, MoveTask, PauseHosting, Remeasure, ResumeHosting,
    SubmitAssignment,
)
from frost_core.api.errors import NodeUnavailableError
from frost_core.api.queries import (
    FetchResult, GetAssignment, GetStatus, ListAssignments, ListEvents, ListPeers, ListPlugins,
)
from frost_core.config import Paths
from frost_core.node.control import call_node, plain_reply
from frost_core.policies.intents import parse_until

FROST_TUI = str(Path(sys.executable).parent / "frost-tui")

# Timings that keep multi-process tests short; the failure detector scales with them. The owner
# policy keeps its defaults: the product has to work on a busy CI machine. A test that needs the
# owner out of its way says so in its own body (`extra_config` with `[owner] policy = "always"`).
FAST_CONFIG = """
[gossip]
interval = 0.3
announce_interval = 2
suspicion_min = 3
"""


REQUESTS = {
    "status": GetStatus, "peers": ListPeers, "events": ListEvents, "plugins": ListPlugins,
    "assignments": ListAssignments, "remeasure": Remeasure, "resume": ResumeHosting, "finish": FinishThenPause,
    "submit": SubmitAssignment,
    "assignment": lambda assignment: GetAssignment(assignment_id=assignment),
    "result": lambda assignment, output, files=None: FetchResult(assignment_id=assignment, output=output, files=files),
    "cancel": lambda assignment: CancelAssignment(assignment_id=assignment),
    "pause": lambda until=None: PauseHosting(until=parse_until(until, now=time.time()) if until else None),
    "evict": lambda task=None: EvictGuests(task_id=task),
    "move": lambda task, node: MoveTask(task_id=task, node=node),
    "add-plugin": lambda path: AddPlugin(path=path),
}
"""The typed request behind each CLI verb, built from the verb's arguments, for tests that script a node."""


def call_verb(paths: Paths, verb: str, **args: Any) -> Any:
    """Send the request behind `verb`; the reply comes back as the plain data `--json` prints."""
    request = REQUESTS[verb](**args)
    return plain_reply(request, call_node(paths, request))


@dataclass
class NodeProcess:
    data_dir: Path
    process: subprocess.Popen
    output: IO[str]
    command: list[str] = field(default_factory=list)
    ended_by_test: bool = False   # stop() or kill() was called: an end before that is the node's own

    @property
    def paths(self) -> Paths:
        return Paths.resolve(config_file=self.data_dir / "config.toml", data_dir=self.data_dir)

    def call(self, verb: str, **args: Any) -> Any:
        return call_verb(self.paths, verb, **args)

    @property
    def name(self) -> str:
        return self.data_dir.name

    @property
    def address(self) -> str:
        return self.call("status")["address"]

    @property
    def node_id(self) -> str:
        return self.call("status")["node_id"]

    def peers(self) -> dict[str, dict]:
        return {p["node_id"]: p for p in self.call("peers")}

    def cli(self, *args: str, check: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([FROST_TUI, *args, "--data-dir", str(self.data_dir), "--config",
                               str(self.data_dir / "config.toml")], capture_output=True, text=True, check=check,
                              timeout=120, cwd=cwd)

    def stop(self) -> None:
        self.ended_by_test = self.ended_by_test or self.process.poll() is None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.output.close()

    def kill(self) -> None:
        self.ended_by_test = True
        self.process.kill()
        self.process.wait()
        self.output.close()


def start_node(
    data_dir: Path, *, key_file: Path, seeds: tuple[str, ...] = (), port: int = 0, name: str | None = None,
    broadcast: str = "", listen_host: str = "127.0.0.1", extra_config: str = "", netns: str | None = None,
    base_config: str = FAST_CONFIG,
    env: dict[str, str] | None = None, log_level: str = "debug", wrapper: tuple[str, ...] = (),
) -> NodeProcess:
    """Start a headless node and wait until its control socket answers; `wrapper` is a command
    that execs the node's (a mount namespace, say)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "config.toml").write_text(base_config + extra_config)
    command = [
        FROST_TUI, "--headless", "--data-dir", str(data_dir), "--config", str(data_dir / "config.toml"),
        "--listen-host", listen_host, "--port", str(port), "--broadcast-address", broadcast,
        "--cluster-key-file", str(key_file), "--name", name or data_dir.name, "--log-level", log_level,
    ]
    for seed in seeds:
        command += ["--seed", seed]
    if netns:
        command = ["ip", "netns", "exec", netns, *command]
    command = [*wrapper, *command]
    output = open(data_dir / "stdout.log", "a")  # noqa: SIM115 - closed by stop() or kill()
    process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                               start_new_session=True)
    node = NodeProcess(data_dir=data_dir, process=process, output=output, command=command)
    deadline = time.monotonic() + 30
    while True:
        try:
            node.call("status")
            return node
        except NodeUnavailableError:
            if process.poll() is not None or time.monotonic() > deadline:
                node.stop()
                raise RuntimeError(f"node in {data_dir} did not start:\n{(data_dir / 'stdout.log').read_text()}")
            time.sleep(0.1)


def free_port() -> int:
    """A loopback port free for both UDP and TCP at this moment (a node listens on both): a port the kernel
    hands out for UDP may be some other test's TCP connection's, and that node would not start."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp, socket.socket() as tcp:
            udp.bind(("127.0.0.1", 0))
            port = udp.getsockname()[1]
            try:
                tcp.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
