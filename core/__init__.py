"""The frost-tui peer node: everything that is not the terminal UI. Never imports Textual."""
