"""`frost-tui --headless`: the same node under plain `trio.run`, stopped cleanly by SIGINT or SIGTERM.

Under systemd it is a `Type=notify` service: READY=1 once it listens, WATCHDOG=1 while its loop
runs, STOPPING=1 on the way out, and its log goes to the journal. A SIGTERM (a stop, a reboot)
first hands the guests to peers, within `node.stop_handoff` seconds, so a reboot loses nothing.
"""

from __future__ import annotations

import logging
import signal
import sys

import trio

from frost_core.api.wording import counted
from frost_core.config import Config
from frost_core.api.errors import ConfigError, FrostError
from frost_core.logs import configure_journal_logging, configure_logging
from frost_core.node import service_manager

log = logging.getLogger("frost.headless")


def run_headless(config: Config) -> int:
    """Run a node until a signal asks it to stop; a stop announces our departure to the peers."""
    if service_manager.logs_to_journal():
        configure_journal_logging(config.get("log.level"))
        log_path = "the journal"
    else:
        log_path = configure_logging(config.paths.log_dir, config.get("log.level"))
    from frost_core.node.wiring import Node

    node = Node(config)
    print(f"frost-tui node {config.node_name} ({node.node_id[:8]}) starting; log: {log_path}", flush=True)
    try:
        trio.run(_serve_until_signalled, node)
    except Exception as error:  # the node's last word: say why once, keep the traceback in the log
        frost_error = find_frost_error(error)
        if frost_error is None:
            log.exception("the node crashed")
            print(f"frost-tui: the node crashed: {_first_leaf(error)!r}; the traceback is in {log_path}",
                  file=sys.stderr)
        else:
            print(f"frost-tui: {frost_error.title}: {frost_error.message}", file=sys.stderr)
        return 2 if isinstance(frost_error, ConfigError) else 1  # the exit codes of docs/cli.md
    return 0


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def find_frost_error(error: BaseException) -> FrostError | None:
    """The FrostError inside `error` (trio wraps task failures in exception groups), if any."""
    if isinstance(error, FrostError):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = find_frost_error(inner)
            if found is not None:
                return found
    return None


async def _serve_until_signalled(node) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(node.serve)
            print(f"listening on {node.address}; data dir {node.paths.data_dir}", flush=True)
            service_manager.notify("READY=1", f"STATUS=listening on {node.address}")
            interval = service_manager.watchdog_interval()
            if interval is not None:
                nursery.start_soon(_keep_watchdog_fed, interval)
            async for signum in signals:
                log.info("stopping on %s", signal.Signals(signum).name)
                service_manager.notify("STOPPING=1", "STATUS=handing guests to peers")
                if signum == signal.SIGTERM:
                    await _hand_off(node, node.config.get("node.stop_handoff"))
                nursery.cancel_scope.cancel()
                break


async def _hand_off(node, deadline: float) -> None:
    """Checkpoint the guests and send them on; whatever is not gone by `deadline` stays checkpointed here."""
    with trio.move_on_after(deadline) as scope:
        count = await node.hand_off_guests()
        log.info("handed %s to peers before stopping", counted(count, "guest"))
    if scope.cancelled_caught:
        log.warning("stopping with guests still leaving after %.0f s; they resume from their checkpoints", deadline)


async def _keep_watchdog_fed(interval: float) -> None:
    """WATCHDOG=1 from the node's own loop: if that loop hangs, systemd restarts the node."""
    while True:
        service_manager.notify("WATCHDOG=1")
        await trio.sleep(interval)
