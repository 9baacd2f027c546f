"""The tabs of the main screen, one pane per module."""
