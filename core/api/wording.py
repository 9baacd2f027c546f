"""How the node and the UI say a count of things: "1 peer", "3 peers", never "3 peer(s)"."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and the noun in the number it needs; `plural` for nouns not made with an s ("copies")."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
