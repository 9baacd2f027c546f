"""Modal dialogs with typed results."""
