"""Screenshots of the UI: a fixed demo state and a live cluster."""
