"""CLI commands for the web area (see commands/__init__.py)."""
