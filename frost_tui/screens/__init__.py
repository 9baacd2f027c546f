"""The tabs (panes) and dialogs of the frost-tui terminal UI, one per module."""
