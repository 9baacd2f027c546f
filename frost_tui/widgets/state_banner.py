"""The machine's hosting state in large type, coloured, with the reason underneath."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from frost_core import HostingView, said_until


_LABELS = {
    "hosting": "● HOSTING",
    "idle": "○ IDLE",
    "paused": "Ⅱ PAUSED",
    "owner-active": "◐ OWNER ACTIVE",
    "held": "◌ HOLDING",
    "evicting": "⇢ EVICTING",
    "finishing": "◔ FINISHING",
}


class StateBanner(Widget):
    """Read from across the room: the one word that says whether this desk is lending its CPU."""

    DEFAULT_CSS = """
    StateBanner { height: 5; padding: 0 2; content-align: left middle; }
    """

    hosting: reactive[HostingView | None] = reactive(None)
    now: float = 0.0

    def watch_hosting(self, hosting: HostingView | None) -> None:
        for state in _LABELS:
            self.set_class(hosting is not None and hosting.state == state, f"-{state}")

    def render(self) -> Group:
        hosting = self.hosting
        if hosting is None:
            return Group(Text("waiting for the node…", style="italic"))
        word = _LABELS.get(hosting.state, hosting.state.upper())
        big = Text(" ".join(word), style="bold")
        lines = [big, Text(hosting.reason)]
        intent = describe_intent(hosting, self.now)
        if intent:
            lines.append(Text(intent, style="italic"))
        return Group(*lines)


def describe_intent(hosting: HostingView, now: float) -> str:
    """What the owner asked for that is still in force, in the owner's words."""
    if hosting.finishing:
        return "finishing the current guests, then pausing"
    if hosting.paused_until is not None:
        return f"paused until {said_until(hosting.paused_until, now)}"
    if hosting.state == "paused":
        return "paused until you resume (p)"
    return ""
