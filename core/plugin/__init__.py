"""Calculation plugins: the author API, plain-data codec, loading, registry, workers."""
