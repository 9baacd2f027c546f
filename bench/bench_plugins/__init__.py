"""Calculation plugins that exist only to be measured by the migration benchmarks."""
