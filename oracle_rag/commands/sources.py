"""CLI commands for the sources area (see commands/__init__.py)."""
