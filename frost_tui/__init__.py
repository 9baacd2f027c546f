"""frost-tui: the terminal UI and command line over the frost_core peer node."""
