"""CLI commands for the oracle area (see commands/__init__.py)."""
