"""Which node `frost-tui` shows: one on another machine, the one running for this data dir, or an embedded one."""

from __future__ import annotations

import getpass
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from frost_core import (
    DEFAULT_PORT, ClusterKey, Config, ConfigError, NodeUnavailableError, local_target, parse_address,
    remember_owner_token, remembered_owner_token, remote_target, running_node_socket,
)

DEFAULT_CONTROL_PORT = DEFAULT_PORT + 1
"""The port `--attach HOST` assumes: `control.listen = "0.0.0.0:47632"` on the other machine."""


def attach_address(text: str) -> tuple[str, int]:
    """HOST or HOST:PORT (IPv6 as [::1]:PORT) for `--attach`."""
    if text.count(":") == 1 or text.startswith("["):
        return parse_address(text, option="--attach")
    return text, DEFAULT_CONTROL_PORT


def choose_targets(config: Config, *, attach: str | None, watch: bool) -> list | None:
    """The nodes to attach to, the first one first; None means: no node runs here, embed one.

    `--attach` puts that node first; otherwise the node running for this data dir. The
    configured host list follows, for switching with `h`.
    """
    remote = [attach_address(attach)] if attach else []
    remote += [a for a in (parse_address(h, option="control.hosts") for h in config.get("control.hosts"))
               if a not in remote]
    targets = []
    local = None if attach else running_node_socket(config.paths)
    if local is not None:
        targets.append(local_target(local))
    if not targets and not attach:
        if watch:
            raise NodeUnavailableError(f"no node runs with the data dir {config.paths.data_dir}, so none to watch")
        return None
    client_id = f"ui@{socket.gethostname()}"[:64]
    for address in remote:
        token = OwnerToken(config.paths.data_dir, address)
        if token() is None and attach and address == remote[0]:
            token.typed = ask_owner_token(address)
        # (A listed host with no token kept is in the list too: the UI says how to get one when `h` comes to it.)
        targets.append(remote_target(address, token, client_id, attached=token.taken))
    return targets


@dataclass
class OwnerToken:
    """The owner token of the node at `address`: the one kept here, read at each attempt (so one kept with
    `frost-tui key remember` while the UI runs is tried at its next), else one typed at --attach's prompt."""

    data_dir: Path
    address: tuple[str, int]
    typed: ClusterKey | None = None

    def __call__(self) -> ClusterKey | None:
        return remembered_owner_token(self.data_dir, self.address) or self.typed

    def taken(self) -> None:
        """The node took the token: a typed one is kept from now on (not before: a mistyped one kept at once would
        be tried on every later start), unless one was kept here meanwhile."""
        if self.typed is not None and remembered_owner_token(self.data_dir, self.address) is None:
            remember_owner_token(self.data_dir, self.address, self.typed)


def ask_owner_token(address: tuple[str, int]) -> ClusterKey:
    """The owner token of the node `--attach` names, asked for on a terminal; a ConfigError saying how to give it
    otherwise."""
    where = f"{address[0]}:{address[1]}"
    if not sys.stdin.isatty():
        raise ConfigError(f"no owner token for {where}: run `frost-tui key owner-token` there, then "
                          f"`frost-tui key remember {where} TOKEN` here", title="Owner token needed")
    return ClusterKey.from_join_code(getpass.getpass(f"Owner token of {where} (`frost-tui key owner-token` there): ")
                                     .strip())
