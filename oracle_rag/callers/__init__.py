"""Who asks and what they may see: callers, roles and groups, API tokens, JWT identity, people, audit."""
