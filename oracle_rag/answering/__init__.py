"""The read path's answers: structured answers in SQL, guarded text-to-SQL aggregates, chat."""
