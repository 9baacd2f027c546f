"""The running node: wiring, its views, its answers to queries, the control socket, headless mode."""
