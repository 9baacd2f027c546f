"""Who this node is: a node id that survives restarts, and the owner token that commands it from afar."""

from __future__ import annotations

import getpass
import os
import uuid
from pathlib import Path

from frost_core.api.errors import ConfigError, StorageError
from frost_core.ledger.signing import NodeKey
from frost_core.wire.security import ClusterKey


def load_node_id(data_dir: Path) -> str:
    """Read data_dir/node_id, creating it on first start: peers and task ids refer to it.

    A first start on a disk that refuses the file is a StorageError naming it (before, a traceback),
    and leaves no half-written file behind."""
    path = data_dir / "node_id"
    if path.exists():
        node_id = path.read_text(encoding="ascii").strip()
        if len(node_id) == 32 and all(c in "0123456789abcdef" for c in node_id):
            return node_id
        raise ConfigError(f"{path} is corrupt: expected 32 hex digits; remove it to get a new node id")
    node_id = uuid.uuid4().hex
    temporary = path.with_suffix(".tmp")
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        with open(temporary, "w", encoding="ascii") as file:
            file.write(node_id)
            file.flush()
            os.fsync(file.fileno())  # a crash must not leave an empty node_id, which reads as corrupt
        os.replace(temporary, path)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise StorageError.writing(path, error) from error
    return node_id


def submitter_id(node_id: str) -> str:
    """Who submits this node's assignments: the OS user running the node at its node id, `alice@<node id>`.

    Stable across restarts (the node id is kept in the data dir, the user is the account) and unique in
    the cluster (two desks of one user are two submitters: each master is the authority on its own
    submitters' usage, and one account on two machines shares nothing else either). Usage and fair
    shares are counted per submitter.
    """
    try:
        user = getpass.getuser()
    except (KeyError, OSError):   # no passwd entry and no LOGNAME (a bare container): the uid says who
        user = str(os.getuid())
    return f"{user}@{node_id}"


def load_node_key(data_dir: Path) -> NodeKey:
    """This node's signing key (data_dir/node.key, mode 0600), made on first start: it signs the node's
    ledger summaries, and peers pin its public half to the node id."""
    return NodeKey.load_or_create(data_dir / "node.key")


def load_owner_token(data_dir: Path) -> ClusterKey:
    """This node's owner token (data_dir/owner.token, mode 0600), created on first use.

    It keys the channel of a UI attached from another machine, and it is not the cluster key:
    a peer, or a guest that stole the cluster key, can never command this desk with that.
    """
    return ClusterKey.load_or_create(data_dir / "owner.token")


def _token_path(data_dir: Path, address: tuple[str, int]) -> Path:
    host = "".join(c if c.isalnum() or c in ".-" else "_" for c in address[0])
    return data_dir / "owner-tokens" / f"{host}_{address[1]}.token"


def remember_owner_token(data_dir: Path, address: tuple[str, int], token: ClusterKey) -> Path:
    """Keep another machine's owner token (mode 0600) so `--attach` and the host list find it."""
    path = _token_path(data_dir, address)
    token.save(path)
    return path


def remembered_owner_token(data_dir: Path, address: tuple[str, int]) -> ClusterKey | None:
    path = _token_path(data_dir, address)
    return ClusterKey.load(path) if path.exists() else None
