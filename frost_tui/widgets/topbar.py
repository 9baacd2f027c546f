"""The header line: which node, how the UI reaches it, its state, and how much runs."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from frost_core import Link, NodeSnapshot, counted


class TopBar(Widget):
    """Worded for the width it has (`describe_topbar`), so it is worded again when the terminal is resized."""

    _said: tuple[str, ...] = ("",)   # the header's forms, widest first

    def show(self, snapshot: NodeSnapshot, link: Link) -> None:
        said = tuple(describe_topbar(snapshot, link, width=width) for width in WIDTHS)
        if said != self._said:
            self._said = said
            self.refresh()

    def render(self) -> Text:
        forms = [Text.from_markup(line) for line in self._said]
        return next((form for form in forms if form.cell_len <= self.content_size.width), forms[-1])


WIDTHS = ("whole", "narrow", "narrowest")


def describe_topbar(snapshot: NodeSnapshot, link: Link, *, width: str = "whole") -> str:
    """The header's text. "narrow" drops the address and the wide gaps, so that 80 columns still show how many
    guests and assignments run (the whole line ended at the peers there); "narrowest" also says how the UI
    reaches the node in a word ("attached to local node" ended the narrow line at "· 1" at 80 columns)."""
    alive = sum(1 for p in snapshot.peers if p.state == "alive" and not p.is_self)
    running = sum(1 for a in snapshot.assignments if a.state == "running")
    where = link.describe(short=width == "narrowest")
    where = where if link.connected else f"[reverse]{where}[/reverse]"
    state = f"[b]{snapshot.hosting.state}[/b]"
    guests = counted(len(snapshot.guests), "guest")
    if width != "whole":
        return f"[b]frost-tui[/b] {snapshot.name} · {where} · {state} · {counted(alive, 'peer')} · {guests} · {running} running"
    return (f"[b]frost-tui[/b]  {snapshot.name} ({snapshot.address})  ·  {where}  ·  {state}  ·  "
            f"{counted(alive, 'peer')}  ·  {guests}  ·  {counted(running, 'assignment')} running")
