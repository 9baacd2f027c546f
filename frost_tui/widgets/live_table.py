"""A keyed table that redraws only the rows whose cells changed.

Textual's DataTable renders every visible line again after any cell update (its caches are
keyed on a global update counter) and derives each line's style through all its ancestors:
with 100 peers at ten snapshots a second that was most of the idle UI's budget, and emptying
the Guests table after `e` took a full-screen repaint. Here each row keeps its rendered line
until its own cells, the column widths or its style change, and a changed row dirties only
its own line on screen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

Cell = str | Text
Row = tuple[str, Sequence[Cell]]
_HEADER_KEY = "\0header"
_CELL_CACHE_SIZE = 20_000


class LiveTable(ScrollView, can_focus=True):
    """Rows are (key, cells); the cursor stays on its key when rows come, go or reorder."""

    DEFAULT_CSS = """
    LiveTable {
        height: 1fr;
        background: $surface;
        color: $foreground;
        & > .live-table--header { text-style: bold; background: $panel; color: $foreground; }
        & > .live-table--even-row { background: $surface-lighten-1 50%; }
        & > .live-table--cursor {
            background: $block-cursor-background; color: $block-cursor-foreground; text-style: bold;
        }
        & > .live-table--cursor-blurred {
            background: $block-cursor-blurred-background; color: $block-cursor-blurred-foreground;
        }
    }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "live-table--header", "live-table--even-row", "live-table--cursor", "live-table--cursor-blurred",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor_by(-1)", "Up", show=False),
        Binding("down", "cursor_by(1)", "Down", show=False),
        Binding("pageup", "cursor_by(-10)", "Page up", show=False),
        Binding("pagedown", "cursor_by(10)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "First", show=False),
        Binding("end", "cursor_to(-1)", "Last", show=False),
    ]

    cursor_row: reactive[int] = reactive(0, init=False, always_update=True)

    class RowHighlighted(Message):
        """The cursor is on another row (key None: the table is empty)."""

        def __init__(self, table: LiveTable, key: str | None) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> LiveTable:
            return self.table

    class HeaderSelected(Message):
        """A column header was clicked: the owner asks to sort by it."""

        def __init__(self, table: LiveTable, column_index: int) -> None:
            super().__init__()
            self.table = table
            self.column_index = column_index

        @property
        def control(self) -> LiveTable:
            return self.table

    def __init__(self, *columns: str, zebra_stripes: bool = True, drop_order: Sequence[int] = (), **kwargs) -> None:
        super().__init__(**kwargs)
        self.columns = tuple(columns)
        # Columns that make way, first to last, when the table is wider than its window (80x24):
        # the ones that say what state a thing is in are never in this list.
        self.drop_order = tuple(drop_order)
        self.hidden: frozenset[str] = frozenset()   # titles of the columns the owner chose not to see (`hide`)
        self._shown: tuple[int, ...] = tuple(range(len(columns)))  # the columns drawn, in order
        self.titles = self.columns  # what the header shows: a column's title, with ▲/▼ when sorted by it
        self.zebra_stripes = zebra_stripes
        self._keys: list[str] = []
        self._cells: dict[str, tuple[Cell, ...]] = {}
        self._header_widths = _measure(self.columns)
        self._cell_widths: dict[str, tuple[int, ...]] = {}  # measured once per change of the row
        self._widths: tuple[int, ...] = tuple(width + 2 for width in self._header_widths)
        # key -> ((columns shown, widths), style, full-width line): reused until any of them changes
        self._lines: dict[str, tuple[tuple, Style, Strip]] = {}
        self._styles: dict[str, Style] = {}
        self._cell_lines: dict[tuple, list[Segment]] = {}  # (cell, width) -> its rendered segments
        self._pending_key: str | None = None  # select_key's row, until it arrives

    # ----------------------------------------------------------------- what the panes call

    def selected_key(self) -> str | None:
        """The key of the row under the cursor, or None when the table is empty."""
        return self._keys[self.cursor_row] if self._keys else None

    def select_key(self, key: str) -> None:
        """Move the cursor to the row with this key, now or as soon as a `show_rows` brings it."""
        if key in self._keys:
            self.cursor_row = self._keys.index(key)
        else:
            self._pending_key = key

    def show_sort(self, column: int, descending: bool) -> None:
        """Mark the column the rows are sorted by, and which way, in the header."""
        titles = tuple(f"{title} {'▼' if descending else '▲'}" if index == column else title
                       for index, title in enumerate(self.columns))
        if titles != self.titles:
            self.titles = titles
            self._header_widths = _measure(titles)
            self._lines.pop(_HEADER_KEY, None)
            self.show_rows([(key, self._cells[key]) for key in self._keys])
            self.refresh()

    def row_text(self, key: str) -> tuple[str, ...]:
        """The plain text of a row's cells, as the owner reads them."""
        return tuple(c.plain if isinstance(c, Text) else c for c in self._cells[key])

    def show_rows(self, rows: Sequence[Row]) -> None:
        """Make the table show `rows` in this order, redrawing only the lines that changed."""
        selected = self.selected_key()
        new_keys = [key for key, _ in rows]
        if self._pending_key in new_keys:
            selected, self._pending_key = self._pending_key, None
        new_cells = {key: cells if isinstance(cells, tuple) else tuple(cells) for key, cells in rows}
        changed = [key for key in new_keys if not _same_row(self._cells.get(key), new_cells[key])]
        for key in changed:
            self._lines.pop(key, None)
            self._cell_widths[key] = _measure(new_cells[key])
        for gone in self._cell_widths.keys() - new_cells.keys():
            del self._cell_widths[gone]
        widths = tuple(max(column) + 2 for column in
                       zip(self._header_widths, *(self._cell_widths[key] for key in new_keys)))
        same_layout = new_keys == self._keys and widths == self._widths
        self._cells = new_cells
        for gone in self._lines.keys() - new_cells.keys() - {_HEADER_KEY}:
            del self._lines[gone]
        if same_layout:
            changed_keys = set(changed)
            for row, key in enumerate(new_keys):
                if key in changed_keys:
                    self._refresh_row(row)
            return
        self._keys, self._widths = new_keys, widths
        self._fit()
        self._resize(Size(self._shown_width(), len(new_keys) + 1))
        self.refresh()
        row = new_keys.index(selected) if selected in new_keys else min(self.cursor_row, max(0, len(new_keys) - 1))
        if row != self.cursor_row or selected not in new_keys:
            self.cursor_row = row

    # ----------------------------------------------------------------- cursor and mouse

    def validate_cursor_row(self, row: int) -> int:
        return max(0, min(row, len(self._keys) - 1))

    def watch_cursor_row(self, old: int, new: int) -> None:
        self._refresh_row(old)
        self._refresh_row(new)
        self._scroll_to_row(new)
        self.post_message(self.RowHighlighted(self, self.selected_key()))

    def action_cursor_by(self, rows: int) -> None:
        self.cursor_row = self.cursor_row + rows

    def action_cursor_to(self, row: int) -> None:
        self.cursor_row = row if row >= 0 else len(self._keys) - 1

    def _on_focus(self, event: events.Focus) -> None:
        super()._on_focus(event)
        self._refresh_row(self.cursor_row)

    def _on_blur(self, event: events.Blur) -> None:
        super()._on_blur(event)
        self._refresh_row(self.cursor_row)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            x = offset.x + self.scroll_offset.x
            edge = 0
            for index in self._shown:
                edge += self._widths[index]
                if x < edge:
                    self.post_message(self.HeaderSelected(self, index))
                    return
            return
        row = offset.y - 1 + self.scroll_offset.y
        if row < len(self._keys):
            self.cursor_row = row

    @property
    def hideable(self) -> tuple[str, ...]:
        """The titles of the columns the owner may hide: those a narrow window may drop, in the table's order."""
        return tuple(title for index, title in enumerate(self.columns) if index in self.drop_order)

    def hide(self, titles: frozenset[str]) -> None:
        """Show every column but these (those not `hideable` stay shown)."""
        self.hidden = frozenset(titles) & frozenset(self.hideable)
        if self.is_mounted:   # (else its first size fits it)
            self.on_resize()

    def on_resize(self) -> None:
        if self._fit():
            self._resize(Size(self._shown_width(), len(self._keys) + 1))
            self.refresh()

    def _fit(self) -> bool:
        """Choose the columns that fit the window, dropping by `drop_order`; True when that changed.

        Dropped columns are named in the border title ("more →"), never left off silently.
        """
        room = self.scrollable_content_region.width
        shown = [index for index, title in enumerate(self.columns) if title not in self.hidden]
        dropped_here = []
        for index in self.drop_order:
            if not room or sum(self._widths[i] for i in shown) <= room:
                break
            if index in shown:
                shown.remove(index)
                dropped_here.append(index)
        # A wide column dropped last may have made room for a narrower one dropped before it (Peers at 100 columns:
        # Address's going leaves room for Last minute): those come back, the most important first.
        for index in reversed(dropped_here[:-1]):
            if sum(self._widths[i] for i in shown) + self._widths[index] <= room:
                shown = sorted((*shown, index))
        shown_now = tuple(shown)
        if shown_now == self._shown:
            return False
        self._shown = shown_now
        dropped = [title for index, title in enumerate(self.columns) if index not in shown_now and title not in
                   self.hidden]
        notes = [f"more → {', '.join(dropped)} (wider window, or enter)"] if dropped else []
        if self.hidden:
            notes.append(f"{len(self.hidden)} hidden (v)")
        self.border_title = " · ".join(notes) or None
        return True

    def _shown_width(self) -> int:
        return sum(self._widths[i] for i in self._shown)

    def _resize(self, virtual: Size) -> None:
        """Set the scrollable size, laying the screen out again only when a scrollbar comes or goes.

        A layout repaints the whole screen: emptying the Guests table after `e` must not cost that.
        """
        view = self.scrollable_content_region.size
        before = self.virtual_size
        if (before.width > view.width) == (virtual.width > view.width) and \
                (before.height > view.height) == (virtual.height > view.height):
            self.set_reactive(LiveTable.virtual_size, virtual)
            self._scroll_update(virtual)
            self.scroll_y = self.scroll_y  # clamped again to the new height
        else:
            self.virtual_size = virtual

    def _scroll_to_row(self, row: int) -> None:
        visible = max(1, self.scrollable_content_region.height - 1)
        top = self.scroll_offset.y
        if row < top:
            self.scroll_to(y=row, animate=False)
        elif row >= top + visible:
            self.scroll_to(y=row - visible + 1, animate=False)

    def _refresh_row(self, row: int) -> None:
        y = row + 1 - self.scroll_offset.y
        if 0 < y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    # ----------------------------------------------------------------- drawing

    def render_lines(self, crop: Region) -> list[Strip]:
        # Styles once per paint, not once per line: a line's style is the widget's plus its role.
        base = self.rich_style
        self._styles = {
            "row": base,
            "header": base + self.get_component_rich_style("live-table--header"),
            "even": base + self.get_component_rich_style("live-table--even-row"),
            "cursor": base + self.get_component_rich_style(
                "live-table--cursor" if self.has_focus else "live-table--cursor-blurred"),
        }
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        if y == 0:
            key, style, cells = _HEADER_KEY, self._styles["header"], self.titles
        else:
            row = y - 1 + scroll_y
            if row >= len(self._keys):
                return Strip.blank(width, self._styles["row"])
            key = self._keys[row]
            cells = self._cells[key]
            if row == self.cursor_row:
                style = self._styles["cursor"]
            else:
                style = self._styles["even" if self.zebra_stripes and row % 2 else "row"]
        cached = self._lines.get(key)
        layout = (self._shown, self._widths)
        if cached is None or cached[0] != layout or cached[1] != style:
            shown_cells = [cells[i] for i in self._shown]
            widths = [self._widths[i] for i in self._shown]
            cached = (layout, style, _render_row(shown_cells, widths, style, self.app.console, self._cell_lines))
            self._lines[key] = cached
        return cached[2].crop_extend(scroll_x, scroll_x + width, style)



def _render_row(cells: Sequence[Cell], widths: Sequence[int], style: Style, console: Console,
                cache: dict[tuple, list[Segment]]) -> Strip:
    """One line: each cell padded by a space each side, cut with an ellipsis if too long.

    Each cell is rendered on its own (and remembered, since a changed row usually differs in
    one cell) so that no run of text crosses a column edge: a glyph drawn from a fallback
    font (★, ✗) then cannot push the next column out of line in an SVG.
    """
    if len(cache) > _CELL_CACHE_SIZE:
        cache.clear()
    segments: list[Segment] = []
    for cell, width in zip(cells, widths):
        key = (cell.plain, cell.style, tuple(cell.spans), width) if isinstance(cell, Text) else (cell, width)
        rendered = cache.get(key)
        if rendered is None:
            text = cell.copy() if isinstance(cell, Text) else Text(cell)
            text.truncate(width - 2, overflow="ellipsis", pad=True)
            padded = Text(" ", end="")
            padded.append_text(text)  # the cell's own style becomes a span, which render() honours
            padded.append(" ")
            rendered = cache[key] = list(padded.render(console))
        segments.extend(rendered)
    return Strip(Segment.apply_style(segments, style), sum(widths))


def _measure(cells: Sequence[Cell]) -> tuple[int, ...]:
    return tuple(cell.cell_len if isinstance(cell, Text) else cell_len(cell) for cell in cells)


def _same_row(a: tuple[Cell, ...] | None, b: tuple[Cell, ...]) -> bool:
    if a is b:
        return True
    return a is not None and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))


def _same(a: Cell, b: Cell) -> bool:
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain == b.plain and a.style == b.style and a.spans == b.spans
    return type(a) is type(b) and a == b
