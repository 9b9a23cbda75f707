"""The reference application: schema (sql/*/demo), ORM models and a seeded data set."""
