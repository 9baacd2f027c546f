"""Widgets of the frost-tui terminal UI: one widget (or one helper family) per module."""
