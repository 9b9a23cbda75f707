"""CLI commands for the writepath area (see commands/__init__.py)."""
