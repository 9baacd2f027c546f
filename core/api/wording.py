"""How the node and the UI say things: a count ("1 peer", "3 peers", never "3 peer(s)"), a peer, a time to come."""

from __future__ import annotations

from datetime import datetime, timedelta


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and the noun in the number it needs; `plural` for nouns not made with an s ("copies")."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def peer_named(node_id: str, name: str | None) -> str:
    """A peer as the owner reads it in events and reasons: "fermat (3398e1c6)", with the start of the id the logs
    and `unquarantine` use; that start alone where the cluster does not know its name (yet, or any more)."""
    return f"{name} ({node_id[:8]})" if name else node_id[:8]


def said_until(at: float, now: float) -> str:
    """A time to come as the owner reads it (a timed pause's end): "17:00" today, "08:00 tomorrow" (`pause --until
    08:00` at 08:40 means the next morning, and "until 08:00" alone read as a time past), else with its day:
    "Thu 3 Dec 08:00"."""
    when, today = datetime.fromtimestamp(at), datetime.fromtimestamp(now).date()
    if when.date() == today:
        return when.strftime("%H:%M")
    if when.date() == today + timedelta(days=1):
        return when.strftime("%H:%M tomorrow")
    return f"{when:%a} {when.day} {when:%b %H:%M}"


def member_waited(placed: bool, waited: str) -> str:
    """A gang member's why column: how long it waited at barriers for the slower members (`waited`, as the screen
    writes a duration), or, while it has no host, that the gang waits for one for each member (its line says why)."""
    return f"waited {waited} at barriers" if placed else "no host yet: the gang starts once every member has one"


def member_state(at_barrier: bool, placed: bool, phase: str) -> str:
    """A gang member's state column, from its own figures and its gang's `phase` (GangView.phase): once the gang
    ended its members are done, or stopped with it (the gang's line says why it failed)."""
    if phase in ("finished", "failed"):
        return "done" if phase == "finished" else "stopped"
    return "at barrier" if at_barrier else ("stepping" if placed else "waiting")
