"""Bring a DataTable up to date with new rows while touching only the cells that changed.

A full clear-and-refill on every snapshot costs CPU and loses the cursor; with 100 peers at
ten snapshots a second that is most of the idle UI's budget.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import DataTable

Cell = str | Text
Row = tuple[str, Sequence[Cell]]


def sync_table(table: DataTable, rows: Sequence[Row]) -> None:
    """Make `table` show `rows` (key, cells) in that order, keeping the cursor on the same key."""
    current_keys = [row_key.value for row_key in table.rows]
    new_keys = [key for key, _ in rows]
    if current_keys == new_keys:
        columns = list(table.columns)
        for index, (key, cells) in enumerate(rows):
            for column_key, cell in zip(columns, cells):
                if _plain(table.get_cell(key, column_key)) != _plain(cell) or _style(table.get_cell(key, column_key)) != _style(cell):
                    table.update_cell(key, column_key, cell)
        return
    selected = selected_key(table)
    table.clear()
    for key, cells in rows:
        table.add_row(*cells, key=key)
    if selected in new_keys:
        table.move_cursor(row=new_keys.index(selected), animate=False)


def selected_key(table: DataTable) -> str | None:
    """The key of the row under the cursor, or None when the table is empty."""
    if table.row_count == 0:
        return None
    row = min(table.cursor_row, table.row_count - 1)
    return table.coordinate_to_cell_key((row, 0)).row_key.value


def _plain(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _style(cell: object) -> str:
    if isinstance(cell, Text):
        return str(cell.style) + "|" + ",".join(f"{s.start}:{s.end}:{s.style}" for s in cell.spans)
    return ""
