"""The Oracle engine: its statements, VPD policies and index DDL."""
