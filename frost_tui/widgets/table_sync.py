"""Bring a DataTable up to date with new rows while touching only the cells that changed.

A full clear-and-refill on every snapshot costs CPU and loses the cursor; with 100 peers at
ten snapshots a second that is most of the idle UI's budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.text import Text
from textual.widgets import DataTable, Static

Cell = str | Text
Row = tuple[str, Sequence[Cell]]


def sync_table(table: DataTable, rows: Sequence[Row]) -> None:
    """Make `table` show `rows` (key, cells) in that order, keeping the cursor on the same key."""
    shown: dict[str, tuple] = getattr(table, "_frost_rows", {})
    new_keys = [key for key, _ in rows]
    if list(shown) == new_keys:
        columns = list(table.columns)
        for key, cells in rows:
            before = shown[key]
            for index, cell in enumerate(cells):
                if not _same(before[index], cell):
                    table.update_cell(key, columns[index], cell)
    else:
        selected = selected_key(table)
        table.clear()
        for key, cells in rows:
            table.add_row(*cells, key=key)
        if selected in new_keys:
            table.move_cursor(row=new_keys.index(selected), animate=False)
    table._frost_rows = {key: tuple(cells) for key, cells in rows}


def update_static(widget: Static, key: object, render: Callable[[], object], *, layout: bool = True) -> None:
    """Re-render `widget` only when `key` (the frozen data it shows) changed since last time.

    An update that may change the widget's height forces a layout of the whole screen, the
    most expensive thing an idle UI can do; fixed-height widgets pass layout=False.
    """
    if getattr(widget, "_frost_key", _UNSET) != key:
        widget._frost_key = key
        widget.update(render(), layout=layout)


_UNSET = object()


def selected_key(table: DataTable) -> str | None:
    """The key of the row under the cursor, or None when the table is empty."""
    if table.row_count == 0:
        return None
    row = min(table.cursor_row, table.row_count - 1)
    return table.coordinate_to_cell_key((row, 0)).row_key.value


def _same(a: Cell, b: Cell) -> bool:
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain == b.plain and a.style == b.style and a.spans == b.spans
    return type(a) is type(b) and a == b
