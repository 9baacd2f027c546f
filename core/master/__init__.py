"""The master side of assignments: the durable store, local scheduling and result files."""
