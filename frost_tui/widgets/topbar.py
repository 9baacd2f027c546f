"""The header line: which node, how the UI reaches it, its state, and how much runs."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from frost_core import Link, NodeSnapshot, counted


class TopBar(Widget):
    """Worded for the width it has (`describe_topbar`), so it is worded again when the terminal is resized."""

    _said: tuple[str, str] = ("", "")   # the whole line, and the line that fits where that one does not

    def show(self, snapshot: NodeSnapshot, link: Link) -> None:
        said = describe_topbar(snapshot, link), describe_topbar(snapshot, link, narrow=True)
        if said != self._said:
            self._said = said
            self.refresh()

    def render(self) -> Text:
        whole, narrow = (Text.from_markup(line) for line in self._said)
        return whole if whole.cell_len <= self.content_size.width else narrow


def describe_topbar(snapshot: NodeSnapshot, link: Link, *, narrow: bool = False) -> str:
    """The header's text. `narrow` drops the address and the wide gaps, so that 80 columns still show how many
    guests and assignments run (the whole line ended at the peers there)."""
    alive = sum(1 for p in snapshot.peers if p.state == "alive" and not p.is_self)
    running = sum(1 for a in snapshot.assignments if a.state == "running")
    where = link.describe() if link.connected else f"[reverse]{link.describe()}[/reverse]"
    state = f"[b]{snapshot.hosting.state}[/b]"
    guests = counted(len(snapshot.guests), "guest")
    if narrow:
        return f"[b]frost-tui[/b] {snapshot.name} · {where} · {state} · {counted(alive, 'peer')} · {guests} · {running} running"
    return (f"[b]frost-tui[/b]  {snapshot.name} ({snapshot.address})  ·  {where}  ·  {state}  ·  "
            f"{counted(alive, 'peer')}  ·  {guests}  ·  {counted(running, 'assignment')} running")
