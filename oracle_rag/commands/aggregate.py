"""CLI commands for the aggregate area (see commands/__init__.py)."""
