"""Who this node is: a node id that survives restarts, and the key of the cluster it belongs to."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from frost_core.api.errors import ConfigError


def load_node_id(data_dir: Path) -> str:
    """Read data_dir/node_id, creating it on first start: peers and task ids refer to it."""
    path = data_dir / "node_id"
    if path.exists():
        node_id = path.read_text(encoding="ascii").strip()
        if len(node_id) == 32 and all(c in "0123456789abcdef" for c in node_id):
            return node_id
        raise ConfigError(f"{path} is corrupt: expected 32 hex digits; remove it to get a new node id")
    data_dir.mkdir(parents=True, exist_ok=True)
    node_id = uuid.uuid4().hex
    temporary = path.with_suffix(".tmp")
    temporary.write_text(node_id, encoding="ascii")
    os.replace(temporary, path)
    return node_id
