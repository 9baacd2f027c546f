"""Crash-safe files on the desk: checkpoints and durable SQLite."""
