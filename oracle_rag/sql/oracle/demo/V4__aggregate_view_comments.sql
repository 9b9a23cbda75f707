-- Comments on the guarded views (issue 26), the way Select AI reads comments: the same text the
-- query model receives as the schema (oracle_rag/aggregate/catalog.py, REFERENCE_CATALOG, which
-- derives it from the sources' declarations: enum values, the lifecycle's finished values, what NULL
-- means). tests/test_aggregate_comments.py checks that every comment here is the catalogue's text.
-- It runs after V3 (which recreated the views) and replaces V2/V3's shorter comments.

COMMENT ON TABLE RAG_V_TASK IS 'tasks the caller may see';

COMMENT ON COLUMN RAG_V_TASK.TASK_ID IS 'primary key';

COMMENT ON COLUMN RAG_V_TASK.STATUS IS 'values TODO, IN_PROGRESS, IN_REVIEW, BLOCKED, DONE; finished = ''DONE''; open (not finished) = STATUS NOT IN (''DONE''), every other value included';

COMMENT ON COLUMN RAG_V_TASK.PRIORITY IS 'values LOW, MEDIUM, HIGH, CRITICAL';

COMMENT ON COLUMN RAG_V_TASK.SPRINT_ID IS 'RAG_V_SPRINT.SPRINT_ID; NULL when in the backlog';

COMMENT ON COLUMN RAG_V_TASK.PROJECT_ID IS 'RAG_V_PROJECT.PROJECT_ID';

COMMENT ON COLUMN RAG_V_TASK.ASSIGNEE_ID IS 'RAG_V_EMPLOYEE.EMPLOYEE_ID; NULL when unassigned';

COMMENT ON COLUMN RAG_V_TASK.STORY_POINTS IS 'story points; NULL = not estimated (not 0)';

COMMENT ON COLUMN RAG_V_TASK.ESTIMATED_HOURS IS 'hours of work; NULL = not estimated (not 0)';

COMMENT ON COLUMN RAG_V_TASK.DUE_DATE IS 'may be NULL';

COMMENT ON TABLE RAG_V_SPRINT IS 'sprints';

COMMENT ON COLUMN RAG_V_SPRINT.SPRINT_ID IS 'primary key; sprint 14 has SPRINT_ID 14 and NAME ''Sprint 14''';

COMMENT ON COLUMN RAG_V_SPRINT.STATUS IS 'values PLANNED, ACTIVE, CLOSED';

COMMENT ON TABLE RAG_V_PROJECT IS 'projects';

COMMENT ON COLUMN RAG_V_PROJECT.PROJECT_ID IS 'primary key';

COMMENT ON COLUMN RAG_V_PROJECT.STATUS IS 'values PLANNING, ACTIVE, ON_HOLD';

COMMENT ON TABLE RAG_V_EMPLOYEE IS 'employees';

COMMENT ON COLUMN RAG_V_EMPLOYEE.EMPLOYEE_ID IS 'primary key';

COMMENT ON COLUMN RAG_V_EMPLOYEE.ROLE IS 'developer, manager or admin';
