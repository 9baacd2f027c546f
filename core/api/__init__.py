"""What crosses from the node to the UI and the CLI: commands, queries, snapshots, errors."""
