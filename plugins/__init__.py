"""Calculation plugins bundled with frost-tui."""
