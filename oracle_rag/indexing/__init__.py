"""The write path: the queue, the worker, chunk writes, backfill, triggers, SQL-source refresh, the model in
the database and its generations."""
