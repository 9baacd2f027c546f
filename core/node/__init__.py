"""The running node: wiring, its views and verbs, the control socket, headless mode."""
