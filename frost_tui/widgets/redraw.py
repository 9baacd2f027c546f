"""Re-render a Static only when the frozen data it shows changed since last time."""

from __future__ import annotations

from collections.abc import Callable

from textual.widgets import Static

_UNSET = object()


def update_static(widget: Static, key: object, render: Callable[[], object], *, layout: bool = True) -> None:
    """Call `render` and show its result only if `key` differs from the last one shown.

    An update that may change the widget's height forces a layout of the whole screen, the
    most expensive thing an idle UI can do; fixed-height widgets pass layout=False.
    """
    if getattr(widget, "_frost_key", _UNSET) != key:
        widget._frost_key = key
        widget.update(render(), layout=layout)
