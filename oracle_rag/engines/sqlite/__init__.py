"""The embedded engine: SQLite with in-process vector and term indexes."""
