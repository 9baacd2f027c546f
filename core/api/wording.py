"""How the node and the UI say things: a count ("1 peer", "3 peers", never "3 peer(s)"), a peer."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and the noun in the number it needs; `plural` for nouns not made with an s ("copies")."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def peer_named(node_id: str, name: str | None) -> str:
    """A peer as the owner reads it in events and reasons: "fermat (3398e1c6)", with the start of the id the logs
    and `unquarantine` use; that start alone where the cluster does not know its name (yet, or any more)."""
    return f"{name} ({node_id[:8]})" if name else node_id[:8]
